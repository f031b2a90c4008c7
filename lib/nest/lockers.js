'use strict'
// Which Locker a @WithLock or @Snatch method uses: that of the SnatchModule of the application its instance belongs to
// (found when the module starts), else the one SnatchModule's running in this process (an instance Nest did not
// make, or a call made while the application starts, before the module found it).

const { SnatchError } = require('../errors')

/** Instance of a provider or controller → its application's Locker. */
const byInstance = new WeakMap()
/** The Lockers of the SnatchModules running in this process. */
const running = new Set()

/** Locked methods of `instances` use `locker`; `locker` counts as running until `stopped(locker)`. */
function started(locker, instances) {
  running.add(locker)
  for (const instance of instances) byInstance.set(instance, locker)
}

/** `locker`'s module stopped. */
function stopped(locker) {
  running.delete(locker)
}

/** The Locker of `instance`, whose method `where` (for the error) is called. */
function lockerOf(instance, where) {
  const locker = (instance !== null && typeof instance === 'object' && byInstance.get(instance)) || undefined
  if (locker !== undefined) return locker
  if (running.size === 1) return running.values().next().value
  const why = running.size === 0 ? 'no SnatchModule is running' : `${running.size} SnatchModules are running`
  throw new SnatchError(
    `${where}: ${why}, and this instance is not a provider or controller of one's application`,
    'ERR_SNATCH_NO_LOCKER',
  )
}

module.exports = { started, stopped, lockerOf }
