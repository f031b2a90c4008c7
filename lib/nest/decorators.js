'use strict'
// The method decorators of redis-snatch/nest: @SnatchSchedule (schedule() options beside @Cron), @WithLock and
// @Snatch (a method run under a lock), and @InjectLocker. A locked method finds its Locker through the SnatchModule
// of the application its instance belongs to (lockers.js).

const { Inject } = require('@nestjs/common')
const { invalidArg } = require('../errors')
const { Locker } = require('../locker')
const { checkKey, lockInit, scheduleInit } = require('../options')
const { lockerOf } = require('./lockers')
const { withRun } = require('./run-context')

/** Metadata key of @SnatchSchedule's options on a method. */
const SCHEDULE_OPTIONS = 'redis-snatch:schedule-options'

/** Injects the application's Locker (the same as injecting the `Locker` class). */
function InjectLocker() {
  return Inject(Locker)
}

/**
 * `locker.schedule()`'s options for the @Cron method below or above it (`ttl`, `startingDeadline`, `retries`,
 * `retryDelay`, `concurrency`, `timeout`, `history`; `timezone` when @Cron gives no `timeZone`).
 */
function SnatchSchedule(options) {
  scheduleInit(options)
  return (target, propertyKey, descriptor) => {
    methodOf('@SnatchSchedule', target, propertyKey, descriptor)
    Reflect.defineMetadata(SCHEDULE_OPTIONS, { ...options }, descriptor.value)
  }
}

/** Metadata key of @SnatchHandler's handler on a method. */
const HANDLER = 'redis-snatch:handler'

/**
 * The method runs the occurrences of the stored schedules whose handler is `name` (`locker.handle(name, fn,
 * options)`), called with the occurrence's context (`{ id, data, tick, fence, signal, ... }`; `currentRun()` inside
 * too).
 */
function SnatchHandler(name, options) {
  if (typeof name !== 'string' || name === '') {
    throw invalidArg(TypeError, '@SnatchHandler needs the handler\'s name: a non-empty string')
  }
  return (target, propertyKey, descriptor) => {
    methodOf('@SnatchHandler', target, propertyKey, descriptor)
    Reflect.defineMetadata(HANDLER, { name, options: options === undefined ? undefined : { ...options } }, descriptor.value)
  }
}

/** The @SnatchHandler of method `fn` (`{ name, options }`), if any. */
function handlerOf(fn) {
  return typeof fn === 'function' ? Reflect.getMetadata(HANDLER, fn) : undefined
}

/** The @SnatchSchedule options of method `fn`, if any. */
function scheduleOptionsOf(fn) {
  return Reflect.getMetadata(SCHEDULE_OPTIONS, fn)
}

/**
 * The method runs under lock `key` (a string, or a function of the method's arguments), waiting for it as
 * `locker.withLock()` does (`options.wait`), and resolves its value; `currentRun()` inside gives the run's context.
 */
function WithLock(key, options) {
  checkKeyOption('@WithLock', key)
  lockInit(options, { canWait: true })
  return wrapMethod('@WithLock', key, (locker, name, run) => locker.withLock(name, run, options))
}

/**
 * The method runs only where lock `key` (a string, or a function of the method's arguments) is won, as
 * `locker.snatchTask()` does: it resolves the method's value, or `undefined` where another process holds the key.
 */
function Snatch(key, options) {
  checkKeyOption('@Snatch', key)
  lockInit(options, { canWait: false })
  return wrapMethod('@Snatch', key, async (locker, name, run) => {
    const result = await locker.snatchTask(name, run, options)
    return result.ran ? result.value : undefined
  })
}

/**
 * A decorator that replaces the method with one that calls `lock(locker, name, run)`: `name` the lock's name from
 * `key` and the call's arguments, `run(ctx)` the method itself with `ctx` as the current run. The method's metadata
 * (Nest's and others') moves to its replacement.
 */
function wrapMethod(decorator, key, lock) {
  return (target, propertyKey, descriptor) => {
    methodOf(decorator, target, propertyKey, descriptor)
    const method = descriptor.value
    const where = `${decorator} ${className(target)}.${String(propertyKey)}`
    const locked = async function (...args) {
      const name = typeof key === 'string' ? key : keyFrom(where, key, this, args)
      return lock(lockerOf(this, where), name, (ctx) => withRun(ctx, () => method.apply(this, args)))
    }
    Object.defineProperty(locked, 'name', { value: method.name })
    for (const metadataKey of Reflect.getOwnMetadataKeys(method)) {
      Reflect.defineMetadata(metadataKey, Reflect.getOwnMetadata(metadataKey, method), locked)
    }
    descriptor.value = locked
    return descriptor
  }
}

/** The lock name `key(...args)` gives for a call of the method `where` decorates, checked. */
function keyFrom(where, key, self, args) {
  const name = key.apply(self, args)
  if (typeof name !== 'string') {
    throw invalidArg(TypeError, `the key function of ${where} must return a string, got ${name === null ? 'null' : `a ${typeof name}`}`)
  }
  checkKey(name)
  return name
}

/** Checks a decorator's `key`: a string (a well-formed lock name; its length is checked when locking) or a function. */
function checkKeyOption(decorator, key) {
  if (typeof key === 'function') return
  if (typeof key !== 'string' || key === '') {
    throw invalidArg(TypeError, `${decorator} needs a key: a non-empty string or a function of the method's arguments`)
  }
  checkKey(key)
}

/** Checks that `decorator` is applied to a method. */
function methodOf(decorator, target, propertyKey, descriptor) {
  if (typeof descriptor?.value !== 'function') {
    const what = propertyKey === undefined ? 'a class' : `${className(target)}.${String(propertyKey)}`
    throw invalidArg(TypeError, `${decorator} applies to methods; ${what} is not one`)
  }
}

/** The name of the class whose prototype (or constructor, for a static member) `target` is. */
function className(target) {
  return typeof target === 'function' ? target.name : target?.constructor?.name
}

module.exports = { InjectLocker, SnatchSchedule, SnatchHandler, WithLock, Snatch, scheduleOptionsOf, handlerOf }
