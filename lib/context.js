'use strict'
// The calling context of a call: the runs of a locker whose fn it runs inside (through every `await`), which the core
// needs to decide what a call on a key they hold comes to (reentrancy: snatch-protocol's `reentry`). Found in V8's
// async stack trace rather than kept in an AsyncLocalStorage: each run's fn is awaited by a function named after the
// run (named when a call looks), and a call looks for those names among its frames only when the answer can matter
// (a fn of its locker's on one of its keys is under way, and the call waits or asks to re-enter). A run started while a fn of its
// locker is under way has its caller await that frame (lib/locker.js, `invoke`), so a run started inside another's fn
// is found inside it too. An AsyncLocalStorage would put promise hooks on every promise of the process under Node 20
// and 22 (about 30% of withfn's CPU per cycle at c=50); this costs a function per run, a link per run started while
// another's fn is under way, and a stack capture only for the calls that need it.

/** How many keys `RunFrames.ended` deletes from `held` before it makes it anew. */
const REMAKE_HELD = 4096

/** Tells lockers' frames apart. */
let lockers = 0

/**
 * The frames of one locker's runs: each run's fn is awaited by a function named `prefix` and the run's id (lib/run.js,
 * `Run.task`), which counts the keys of the fns under way in `held` (`began`, `ended`); `within()` finds them.
 */
class RunFrames {
  prefix = `redis-snatch run ${++lockers}:`
  /** The keys of the fns under way, each with how many. */
  held = new Map()
  /** Keys deleted from `held` since it was last made anew. */
  #deleted = 0

  /** A fn on `key` is under way. */
  began(key) {
    this.held.set(key, (this.held.get(key) ?? 0) + 1)
  }

  /**
   * A fn on `key` settled. `held` is made anew every REMAKE_HELD deletions: a Map whose hash table reached the old
   * generation (a locker idle a while) makes every later table there too, each replaced one keeping the keys it held
   * (the callers' strings) for scavenges until the next full collection (lib/id-table.js); a new Map's table is young.
   */
  ended(key) {
    const n = this.held.get(key)
    if (n !== 1) {
      this.held.set(key, n - 1)
      return
    }
    this.held.delete(key)
    if (++this.#deleted === REMAKE_HELD) {
      this.#deleted = 0
      this.held = new Map(this.held)
    }
  }

  /**
   * The ids of this locker's runs (`runs`: id → Run) whose fn the caller runs inside, innermost first, when a fn of
   * one of them on one of `keys` is under way; else none, without looking (the stack is not taken). Their frames are
   * named here, not when made: the name costs nothing to the runs nobody looks for.
   */
  within(runs, keys) {
    if (this.held.size === 0 || !keys.some((key) => this.held.has(key))) return []
    for (const run of runs.values()) run.nameFrame?.(this.prefix)
    const { stackTraceLimit, prepareStackTrace } = Error
    Error.stackTraceLimit = Infinity
    Error.prepareStackTrace = (_, callSites) => callSites
    const holder = {}
    try {
      Error.captureStackTrace(holder)
      const ids = []
      // A runtime without V8's call sites (Bun's JavaScriptCore may give a string): no context found.
      if (!Array.isArray(holder.stack)) return ids
      for (const site of holder.stack) {
        const name = site.getFunctionName()
        if (name !== null && name.startsWith(this.prefix)) ids.push(Number(name.slice(this.prefix.length)))
      }
      return ids
    } finally {
      Error.stackTraceLimit = stackTraceLimit
      Error.prepareStackTrace = prepareStackTrace
    }
  }
}

module.exports = { RunFrames }
