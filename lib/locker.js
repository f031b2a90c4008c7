'use strict'

const { LIMITS, NativeLocker, OutcomeKind } = require('./native')
const diagnostics = require('./diagnostics')
const { LockLostError, atCaller, fromNative, fromNativeError, invalidArg } = require('./errors')
const { KeepAlive } = require('./keep-alive')
const { Lock } = require('./lock')
const { MultiLock, checkKeys } = require('./multi-lock')
const { sharedOptions, encodeValue, decodeValue, encodeError, decodeError } = require('./shared')
const {
  lockerInit,
  lockInit,
  scheduleInit,
  closeDrain,
  checkKey,
  checkFn,
  checkRange,
  checkString,
  checkType,
  snapshot,
} = require('./options')
const { heldLock, occurrenceRecord, scheduleInfo } = require('./fleet')
const { IdTable } = require('./id-table')
const { Leadership, LeaderObserver } = require('./leadership')
const { ReadWriteLock } = require('./read-write-lock')
const { RunFrames } = require('./context')
const { Run } = require('./run')
const { ScheduledTask } = require('./schedule')
const { storedSpec, storedInfo } = require('./stored')
const { Semaphore, checkLimit } = require('./semaphore')

/** What the native side tells, defined once in the binding (src/delivery.rs, `OutcomeKind`). */
const INVOKE = OutcomeKind.Invoke
const LOST = OutcomeKind.Lost
const ABORTED = OutcomeKind.Aborted
const FAILED = OutcomeKind.Failed
const SKIPPED = OutcomeKind.Skipped
const UNCLAIMED = OutcomeKind.Unclaimed
const MISSED = OutcomeKind.Missed
const STORED = OutcomeKind.Stored
const LEADER = OutcomeKind.Leader
const ERRED = OutcomeKind.Erred

/** The keys of the Locker's methods that only the dashboard asks (lib/dashboard): the deployment, the semaphores. */
const deployment = Symbol('redis-snatch deployment')
const semaphores = Symbol('redis-snatch semaphores')
const storedSummary = Symbol('redis-snatch stored summary')
/** The key of the Locker's method that shared() and redis-snatch/idempotency run fn for a shared result with. */
const sharedRun = Symbol('redis-snatch shared run')

/** The greatest id the facade gives its runs, locks, operations, schedules and campaigns (the core's own are above). */
const MAX_ID = LIMITS.maxCallerId

/**
 * The native side's delivery, `deliver(kind, id, fence, extra)`: every outcome of an operation (it settles the
 * operation's promise with `{ kind, fence, extra }`), of a run (call its fn, abort its signal), of a held lock (its
 * loss) and of a schedule (its occurrences' fns and events); kinds and their arguments: the binding's `OutcomeKind`.
 * Made outside the Locker so that it does not hold the Locker (the native side keeps it for as long as the locker
 * lives, and closures made in one function share their captured variables): an unreachable Locker is collected, and
 * then closed.
 */
function deliverTo(pending, runs, locks, schedules, watchers, keepAlive) {
  return (kind, id, fence, extra) => {
    switch (kind) {
      case INVOKE:
        if (extra === undefined || extra === true) invoke(pending, id, runs.get(id), fence, undefined, extra === true)
        else if (Array.isArray(extra)) invoke(pending, id, runs.get(id), fence, { fences: extra })
        else if (typeof extra === 'number') watchers.get(extra)?._term(id, fence)
        else schedules.get(extra.schedule)?._attempt(id, extra, fence)
        return
      case LEADER:
        watchers.get(id)?._leader(extra)
        return
      case ERRED:
        watchers.get(id)?._erred(fromNativeError(extra))
        return
      case ABORTED:
        runs.get(id)?.aborted(extra)
        return
      case LOST:
        if (runs.has(id)) runs.get(id).lost(extra)
        else locks.get(id)?._lost(extra)
        return
      case SKIPPED:
      case UNCLAIMED:
      case MISSED:
        schedules.get(id)?._told(kind, extra)
        return
    }
    const settle = pending.get(id)
    if (settle === undefined) {
      // The end of a schedule's attempt or a leader's term: a run the native side started, not an operation.
      const run = runs.get(id)
      runs.delete(id)
      run?.end(kind, fence, extra)
      return
    }
    pending.delete(id)
    keepAlive.drop()
    if (kind === FAILED) settle.reject(fromNativeError(extra))
    else settle.resolve({ kind, fence, extra })
  }
}

/**
 * Invokes the fn of the caller's run `id` (`run.task(id, fence, more, direct)`). A run started while a fn of its locker
 * was under way (`run.linked`: its caller may run inside one) has its caller await fn's frame (lib/context.js) before
 * the run's end: the caller's operation follows that frame, and the end is told to a new one. So V8's async stack
 * trace from inside fn reaches the caller's frames, and a call inside fn finds the runs its caller runs inside too.
 */
function invoke(pending, id, run, fence, more, direct) {
  const called = run.task(id, fence, more, direct)
  if (!run.linked) return
  const settle = pending.get(id)
  const end = new Promise((resolve, reject) => pending.set(id, { resolve, reject }))
  called.then(() => end).then(settle.resolve, settle.reject)
}

/** Checks `value`, when given, is an integer from 1 to `max`. */
function checkCount(name, value, max) {
  checkType(name, value, 'number')
  if (value !== undefined && !(Number.isInteger(value) && value >= 1 && value <= max)) {
    throw invalidArg(RangeError, `${name} must be an integer from 1 to ${max}, got ${value}`)
  }
}

/** Acquires locks and runs tasks under them, on one Redis (`url`) or a Redlock set (`urls`). */
class Locker {
  #native
  #nextId = 1
  /** Operation id → its promise's settlers. (IdTables, not Maps, for the tables written by every call: lib/id-table.js.) */
  #pending = new IdTable()
  /** Run id → its Run, which the native side has call the fn and hear of loss (a schedule's occurrences too). */
  #runs = new IdTable()
  /** Schedule id → its ScheduledTask. */
  #schedules = new Map()
  /** Campaign (lead) or observer (observe) id → its Leadership or LeaderObserver. */
  #watchers = new Map()
  /** This replica's name in lock values (`instanceId`). */
  #instanceId
  /** Acquisition id → a Lock not yet released or lost. */
  #locks = new IdTable()
  /** Alive while operations are pending or autoExtend locks are held. */
  #keepAlive = new KeepAlive()
  /** Tells the native side that the event loop turns (see `maxStall`); null when nothing watches it. */
  #beats = null
  /** The native operations a Lock uses. */
  #lockOps
  /** Starts a run: `(id, key, required, ttl?, minHold?, autoExtend?, wait?)`. */
  #startRun
  /** Tells the native side that the fn of run `id` has settled: `(id, failure?)`. */
  #taskDone
  /** `#taskDone(id)`, as a run's `finish`. */
  #finishRun
  /** Starts a one-attempt acquisition: `(id, key, ttl?, minHold?, autoExtend?)`. */
  #startTryLock
  /** Where a call finds the runs whose fn it runs inside (lib/context.js). */
  #frames = new RunFrames()

  constructor(options) {
    const init = lockerInit(options)
    this.#instanceId = init.instanceId
    const deliver = deliverTo(this.#pending, this.#runs, this.#locks, this.#schedules, this.#watchers, this.#keepAlive)
    try {
      this.#native = new NativeLocker(init, deliver)
    } catch (err) {
      throw fromNative(err)
    }
    // Plain functions rather than methods: every run calls the first two, every tryLock cycle the others, and a
    // native method call costs several times as much (their signatures: the binding's RunFunctions).
    this.#beats = beatsOf(this.#native, init.maxStall)
    const functions = this.#native.runFunctions()
    ;({ startRun: this.#startRun, taskDone: this.#taskDone, startTryLock: this.#startTryLock } = functions)
    const taskDone = this.#taskDone
    this.#finishRun = (id) => taskDone(id)
    const { startRelease } = functions
    this.#lockOps = {
      extend: (id, ttl) => this.#operation((op) => this.#native.extend(op, id, ttl)),
      release: (id) => this.#operation((op) => startRelease(op, id)),
      remainingMs: (id) => this.#native.remainingMs(id),
      handOver: (id) => {
        try {
          return this.#native.handOver(id)
        } catch (err) {
          throw fromNative(err)
        }
      },
    }
  }

  /** One attempt: if this process wins `key`, run `fn`, release, resolve `{ ran: true, value, fence }`; else `{ ran: false }`. */
  async snatchTask(key, fn, options) {
    const outcome = await this.#run(key, fn, lockInit(options, { canWait: false }), false)
    return outcome ?? { ran: false }
  }

  /** Waits up to `options.wait` ms for `key`, runs `fn`, releases; resolves fn's value, rejects LockTimeoutError. */
  async withLock(key, fn, options) {
    const outcome = await this.#run(key, fn, lockInit(options, { canWait: true }), true)
    return outcome.value
  }


  /** One attempt; `null` when the key is held by someone else. */
  async tryLock(key, options) {
    const init = lockInit(options, { canWait: false })
    return this.#acquire(key, init, 'tryLock', (op) =>
      init === undefined ? this.#startTryLock(op, key) : this.#startTryLock(op, key, init.ttl, init.minHold, init.autoExtend),
    )
  }

  /** Waits up to `options.wait` ms for `key`; rejects LockTimeoutError. */
  async lock(key, options) {
    const init = lockInit(options, { canWait: true })
    const start = this.#inContext([key], { lock: true, set: false, waits: true, reentrant: init?.reentrant }, (op) =>
      this.#native.acquire(op, key, init),
    )
    return this.#acquire(key, init, 'lock', start)
  }

  /**
   * One caller across the fleet runs `fn` under the lock `key` and stores its value (or error) for `resultTtl` ms;
   * the others, now and within `resultTtl`, get that value without running fn (docs/locks.md, "Shared results").
   * Waits up to `wait` ms (default 30 s) for a round under way, or until `signal` aborts.
   */
  async shared(key, fn, options) {
    checkKey(key)
    checkFn(fn)
    const o = sharedOptions(options)
    o.signal?.throwIfAborted()
    /** What fn came to, as stored: its error's bytes, or its value's (ResultError, and stored so, when it cannot be). */
    const store = (run) => {
      const { threw, error, value } = run.did()
      if (threw) return [true, encodeError(error)]
      try {
        return [false, encodeValue(value, o)]
      } catch (err) {
        run.fail(err)
        return [true, encodeError(err)]
      }
    }
    const got = await this[sharedRun](key, fn, { ...o, store }, 'shared')
    if (got.stored === undefined) return got.own.value
    if (got.stored.error) throw decodeError(got.stored.bytes)
    return decodeValue(got.stored.bytes, o)
  }

  /**
   * A run of `fn` for the shared result of `key` (for `method`, in diagnostics), for shared() and
   * redis-snatch/idempotency (not public API): the callers of this process share one turn at a time, and a turn finds
   * the result stored or runs fn under the key's lock and stores what `store(run)` says (`[error, bytes]`, or null for
   * nothing). Resolves `{ stored: { error, bytes } }`, or `{ own }` (fn's outcome, as snatchTask's); rejects fn's
   * error, LockLostError, or LockTimeoutError after `lock.wait`, or `signal`'s reason once it aborts.
   */
  async [sharedRun](key, fn, { lock, storeErrors, resultTtl, signal, store }, method) {
    checkKey(key)
    checkFn(fn)
    const native = this.#native
    const finish = (id, run) => {
      const kept = store(run)
      native.sharedDone(id, kept?.[0] ?? false, kept?.[1] ?? null, resultTtl)
    }
    const run = this.#newRun(key, fn, method, finish)
    const completion = await this.#runWith(run, (op) => native.runShared(op, key, lock, storeErrors), signal)
    if (completion.kind === STORED) return { stored: { error: completion.extra.error, bytes: completion.extra.bytes } }
    return { own: run.outcome(completion) }
  }

  /**
   * Holds every key of `keys` or none (waiting up to `options.wait` ms in all; rejects LockTimeoutError naming the
   * first key not had in time): a MultiLock of one Lock per key, taken in a fixed order so that callers naming the
   * same keys in any order never deadlock, renewed together (with `autoExtend: true`).
   */
  async lockAll(keys, options) {
    const list = checkKeys(keys)
    const init = lockInit(options, { canWait: true })
    const ids = list.map(() => this.#newId())
    const started = diagnostics.now()
    const begun = list.map((key) => diagnostics.begin(this, key, 'lockAll'))
    let start = () => this.#native.lockAll(ids, list, init)
    const within = this.#frames.within(this.#runs, list)
    if (within.length > 0) {
      // Inside a run holding one of the keys: refused, told to the first id; the others are not waited for.
      const reentering = { keys: list, lock: true, set: true, waits: true, reentrant: false, within }
      start = () => {
        if (this.#native.reenter(ids[0], reentering)) this.#forget(ids.slice(1))
        else this.#native.lockAll(ids, list, init)
      }
    }
    let completions
    try {
      // Told together: every lock, or the set's error to each.
      completions = await Promise.all(this.#operations(ids, start))
    } catch (err) {
      list.forEach((key, i) => diagnostics.publishError(key, undefined, started, err, begun[i]))
      throw atCaller(err)
    }
    const locks = list.map((key, i) => this.#held(key, ids[i], init, completions[i], started, begun[i]))
    return new MultiLock(list, locks)
  }

  /**
   * Holds every key of `keys` or none (as lockAll), then runs `fn({ signal, fences, keys, fence, key, validUntil })`
   * (`fences[i]` is `keys[i]`'s; `fence` and `key` the first key's), renewed while fn runs unless `autoExtend: false`,
   * then every lock released. Resolves fn's value; fn's error, or LockLostError when a lease was lost.
   */
  async withLocks(keys, fn, options) {
    const list = checkKeys(keys)
    checkFn(fn)
    const init = lockInit(options, { canWait: true })
    const run = this.#newRun(list[0], fn, 'withLocks', this.#finishRun, { keys: list })
    const start = this.#inContext(list, { lock: false, set: true, waits: true, reentrant: init?.reentrant }, (op) =>
      this.#native.runAll(op, list, init),
    )
    const completion = await this.#runWith(run, start)
    return run.outcome(completion).value
  }

  /**
   * Continues a lock another process handed over (`lock.handoff()`): the Lock is this locker's from now on, renewed
   * (unless `autoExtend: false`) with `ttl` (default: the locker's), and the original can neither extend nor release
   * it. Rejects LockLostError when the key no longer holds the handle's token: it expired, was adopted already, or the
   * token is not the lock's.
   */
  async adopt(handle, options) {
    const { key, token, fence, validUntil } = snapshot('handle', handle, ['key', 'token', 'fence', 'validUntil'])
    checkKey(key)
    checkString('token', token)
    checkString('fence', fence)
    checkType('validUntil', validUntil, 'number')
    const init = lockInit(options, { canWait: false })
    const autoExtend = init?.autoExtend ?? true
    const lock = await this.#acquire(key, { ...init, autoExtend }, 'adopt', (op) =>
      this.#native.adopt(op, key, token, fence, { ...init, autoExtend }),
    )
    if (lock === null) throw new LockLostError(key, { reason: 'handoff' })
    return lock
  }

  /**
   * Runs `fn` at every occurrence of `cron` (5 or 6 fields, or a macro like '@hourly') on exactly one replica.
   * Options: `ttl` (lease of each run, renewed while fn runs), `timezone` (IANA, default 'UTC').
   */
  schedule(name, cron, fn, options) {
    checkKey(name)
    checkString('cron', cron)
    checkFn(fn)
    const init = scheduleInit(options)
    const id = this.#newId()
    let native
    try {
      native = this.#native.schedule(id, name, cron, init)
    } catch (err) {
      throw fromNative(err)
    }
    const forget = () => this.#schedules.delete(id)
    const task = new ScheduledTask(name, fn, this, native, {
      runs: this.#runs,
      taskDone: this.#taskDone,
      remainingMs: this.#lockOps.remainingMs,
      forget,
      timeout: init.timeout,
      instance: this.#instanceId,
    })
    this.#schedules.set(id, task)
    return task
  }

  /**
   * Makes this replica a runner of the stored schedules whose handler is `name`: each occurrence runs `fn` once across
   * the fleet, with `{ signal, fence, key, tick, attempt, why, id, data }`; at most `maxRunning` at once here. The
   * returned handler is an EventEmitter like a ScheduledTask ('run', 'error'), with `stop()`.
   */
  handle(name, fn, options) {
    checkString('name', name)
    checkFn(fn)
    const { maxRunning } = snapshot('options', options, ['maxRunning'])
    checkCount('maxRunning', maxRunning, LIMITS.maxCount)
    const id = this.#newId()
    let native
    try {
      native = this.#native.handle(id, name, maxRunning)
    } catch (err) {
      throw fromNative(err)
    }
    const forget = () => this.#schedules.delete(id)
    const handler = new ScheduledTask(name, fn, this, native, {
      runs: this.#runs,
      taskDone: this.#taskDone,
      remainingMs: this.#lockOps.remainingMs,
      forget,
      timeout: undefined,
      instance: this.#instanceId,
    })
    this.#schedules.set(id, handler)
    return handler
  }

  /** Creates or replaces stored schedule `id`, fleet-wide: its next occurrence follows `spec`. Resolves its info. */
  async upsertSchedule(id, spec) {
    checkKey(id)
    const json = storedSpec(spec)
    return storedInfo(await this.#stored('upsert', id, json))
  }

  /** Removes stored schedule `id`: true when it existed. Once this resolves, no occurrence of it starts. */
  async removeSchedule(id) {
    checkKey(id)
    return this.#stored('remove', id)
  }

  /** Stored schedule `id`, or null. */
  async getSchedule(id) {
    checkKey(id)
    const found = await this.#stored('get', id)
    return found === null ? null : storedInfo(found)
  }

  /**
   * One page of the stored schedules (of `handler`, their ids matching the glob `match`): `limit` at most (default
   * 100, at most 1000); pass the answer's `cursor` for the next page (null on the last).
   */
  async listSchedules(options) {
    const { handler, match, limit = 100, cursor } = snapshot('options', options, ['handler', 'match', 'limit', 'cursor'])
    checkType('handler', handler, 'string')
    checkType('match', match, 'string')
    checkType('cursor', cursor ?? undefined, 'string')
    checkCount('limit', limit, LIMITS.maxCount)
    const list = { handler, pattern: match, limit, cursor: cursor ?? undefined }
    const { extra } = await this.#operation((op) => this.#native.listStored(op, list))
    const page = JSON.parse(extra)
    return { schedules: page.schedules.map(storedInfo), cursor: page.cursor }
  }

  /**
   * The stored schedules by handler, for `check`, the metrics and the dashboard (not public API): `[{ handler,
   * schedules, overdue, runners }]` (how many, how many due over a minute ago that no runner took, live runners). Its
   * cost does not grow with the schedules.
   */
  async [storedSummary]() {
    return this.#stored('summary', '')
  }

  async #stored(op, target, json) {
    const { extra } = await this.#operation((id) => this.#native.stored(id, op, target, json))
    return JSON.parse(extra)
  }

  /**
   * Campaigns for leadership of `name` (the lock `name`): while this replica holds it, fn runs with `{ signal, fence,
   * term, validUntil, key }`; when the term ends (fn settled, lease lost, resign()), it campaigns again after
   * `retry` ms (default 1000), which is also how long a campaign waits before it looks again. Options: `ttl` (the
   * lease, renewed while fn runs), `retry`.
   */
  lead(name, fn, options) {
    checkKey(name)
    checkFn(fn)
    const o = snapshot('options', options ?? {}, ['ttl', 'retry'])
    checkType('ttl', o.ttl, 'number')
    checkType('retry', o.retry, 'number')
    const id = this.#newId()
    let campaign
    try {
      campaign = this.#native.lead(id, name, o.ttl, o.retry)
    } catch (err) {
      throw fromNative(err)
    }
    const hooks = {
      self: this.#instanceId,
      runs: this.#runs,
      taskDone: this.#taskDone,
      remainingMs: this.#lockOps.remainingMs,
    }
    const leadership = new Leadership(this, name, fn, campaign, hooks, () => this.#watchers.delete(id))
    this.#watchers.set(id, leadership)
    return leadership
  }

  /**
   * Watches who leads `name` (who holds the lock `name`) without campaigning: told of each new leader when it is
   * elected, and of a leader that died when its lease ends. `close()` the observer when done.
   */
  observe(name) {
    checkKey(name)
    const id = this.#newId()
    let watching
    try {
      watching = this.#native.observe(id, name)
    } catch (err) {
      throw fromNative(err)
    }
    const observer = new LeaderObserver(watching, () => this.#watchers.delete(id))
    this.#watchers.set(id, observer)
    return observer
  }

  /**
   * A counting semaphore: at most `limit` holders of `key` at once, across every process; each permit is a Lock.
   * One Redis, Sentinel or Cluster (not Redlock). A lock and a semaphore must not share a key.
   */
  semaphore(key, limit) {
    checkKey(key)
    checkLimit(limit)
    const acquire = (init, wait) =>
      this.#acquire(key, init, wait ? 'acquire' : 'tryAcquire', (op) => this.#native.acquirePermit(op, key, limit, init, wait))
    return new Semaphore(key, limit, acquire, (fn, init) => this.#runAs(key, 'permit', limit, fn, init, 'withPermit'))
  }

  /**
   * A read-write lock: many readers or one writer of `key` at once, across every process; each read or write lock
   * is a Lock. One Redis, Sentinel or Cluster (not Redlock). A lock, a semaphore and a read-write lock must not share
   * a key.
   */
  rwlock(key) {
    checkKey(key)
    const acquire = (write, init, wait) =>
      this.#acquire(key, init, write ? 'write' : 'read', (op) => this.#native.acquireReadWrite(op, key, write, init, wait))
    const run = (write, fn, init) =>
      this.#runAs(key, write ? 'write' : 'read', 0, fn, init, write ? 'withWrite' : 'withRead')
    return new ReadWriteLock(key, acquire, run)
  }

  /**
   * The keys this locker's waiting calls waited for most since it was made (or since the last call with `reset`),
   * most first: `limit` of them at most (default 10, LIMITS.defaultContentionLimit), each `{ key, waits, waitMs,
   * timeouts }`. Kept in a table of at most LIMITS.contentionKeys keys in the core, however many keys wait.
   */
  contention(options) {
    const { limit, reset } = snapshot('options', options, ['limit', 'reset'])
    checkLimitOption(limit)
    checkType('reset', reset, 'boolean')
    return this.#native.contention(limit, reset)
  }

  /** What Redis holds for `key` now, for dashboards and debugging: `null` when it is free. */
  async inspect(key) {
    checkKey(key)
    const { fence, extra } = await this.#answer((op) => this.#native.inspect(op, key))
    if (fence === undefined) return null
    return { ttl: extra.ttl, fence, holders: extra.holders, holder: extra.holder ?? null }
  }

  /**
   * Deletes `key`'s lock whoever holds it (an operator's tool) and wakes its waiters; true when there was one. The
   * holder's next extension is refused and its signal aborts.
   */
  async forceRelease(key) {
    checkKey(key)
    return (await this.#answer((op) => this.#native.forceRelease(op, key))).extra
  }

  /** Every schedule a live replica registered, fleet-wide (none needs to be registered in this process), by name. */
  async schedules() {
    return (await this.#ask({ kind: 'schedules' })).map(scheduleInfo)
  }

  /** Schedule `name`'s newest records, newest first: `limit` of them at most (default 50, LIMITS.defaultHistoryLimit). */
  async history(name, options) {
    checkKey(name)
    const { limit } = snapshot('options', options, ['limit'])
    checkLimitOption(limit)
    return (await this.#ask({ kind: 'history', name, limit })).map(occurrenceRecord)
  }

  /** Every replica skips schedule `name`'s occurrences (reason 'suspended') until `resume(name)`. */
  async suspend(name) {
    checkKey(name)
    await this.#ask({ kind: 'suspend', name })
  }

  /** Schedule `name` runs again. */
  async resume(name) {
    checkKey(name)
    await this.#ask({ kind: 'resume', name })
  }

  /**
   * One run of schedule `name` now, on exactly one live replica that registered it (excluded against its scheduled
   * runs by the run lock); rejects NoReplicaError when none is live. Resolves `{ tick }`, the manual run's tick.
   */
  async trigger(name) {
    checkKey(name)
    const { tick } = await this.#ask({ kind: 'trigger', name })
    return { tick: new Date(tick) }
  }

  /**
   * The locks held now under this locker's prefix whose names match the glob `match` (default '*'): `limit` of them
   * at most (default 1000), by name, each `{ key, holder, ttl, fence }`. A SCAN: of each master on a cluster.
   */
  async locks(options) {
    const { match, limit } = snapshot('options', options, ['match', 'limit'])
    checkType('match', match, 'string')
    checkLimitOption(limit)
    return (await this.#ask({ kind: 'locks', pattern: match, limit })).map(heldLock)
  }

  /**
   * The deployment, for the dashboard (not public API): `{ kind, servers: [{ name, version, latencyMs }] }`, each
   * server asked for its version and timed on a PING.
   */
  async [deployment]() {
    return this.#ask({ kind: 'deployment' })
  }

  /**
   * The semaphores with permits held now, for the dashboard (not public API): up to `limit`, each `{ key, holders,
   * limit, ttl }` (`limit` as their last acquisition gave it, null once gone).
   */
  async [semaphores](limit) {
    return this.#ask({ kind: 'semaphores', limit })
  }

  /**
   * Takes no new work (new calls reject ClosedError, schedules claim nothing more, campaigns stop and leaders step
   * down), lets the fns running finish (with `drain: false`, none; with `timeout`, that long at most: their signals
   * then abort with ClosedError, and a schedule's attempt is recorded interrupted and run again at once by another
   * replica), releases every lock still held and closes the connections. Idempotent.
   */
  async close(options) {
    const drainMs = closeDrain(options)
    // From now on nothing new is taken; campaigns and observers stop, and a leader's term steps down.
    await this.#answer((op) => this.#native.close(op, drainMs))
    clearInterval(this.#beats ?? undefined)
    for (const lock of this.#locks.values()) lock._released()
    for (const schedule of this.#schedules.values()) schedule._closed()
    for (const watcher of [...this.#watchers.values()]) watcher._closed()
  }

  /**
   * Starts a native operation under `id` (`start(id)` may throw for bad input) and resolves its outcome
   * (`{ kind, fence, extra }`), which may be told while `start` runs. The process stays alive while it is pending.
   */
  #operation(start, id = this.#newId()) {
    const outcome = new Promise((resolve, reject) => this.#pending.set(id, { resolve, reject }))
    this.#keepAlive.hold()
    try {
      start(id)
    } catch (err) {
      this.#pending.delete(id)
      this.#keepAlive.drop()
      return Promise.reject(fromNative(err))
    }
    return outcome
  }

  /** `#operation(start)` awaited: its error rethrown with the caller's stack (`atCaller`). */
  async #answer(start) {
    try {
      return await this.#operation(start)
    } catch (err) {
      throw atCaller(err)
    }
  }

  /**
   * Starts a native operation told under each of `ids` (`start()` may throw for bad input); the outcome of each, as
   * `#operation` resolves one.
   */
  #operations(ids, start) {
    const outcomes = ids.map((id) => new Promise((resolve, reject) => this.#pending.set(id, { resolve, reject })))
    ids.forEach(() => this.#keepAlive.hold())
    try {
      start()
    } catch (err) {
      for (const id of ids) {
        this.#pending.delete(id)
        this.#keepAlive.drop()
      }
      const error = fromNative(err)
      return ids.map(() => Promise.reject(error))
    }
    return outcomes
  }

  /** Operations `ids` will not be told anything: their promises are forgotten. */
  #forget(ids) {
    for (const id of ids) {
      if (this.#pending.delete(id)) this.#keepAlive.drop()
    }
  }

  /** Asks the fleet `question` (the binding's `FleetQuestion`); its answer, parsed. */
  async #ask(question) {
    const { extra } = await this.#answer((op) => this.#native.ask(op, question))
    return JSON.parse(extra)
  }

  /** A new id for an operation or a schedule (the ids wrap around below the native side's own). */
  #newId() {
    const id = this.#nextId
    this.#nextId = id === MAX_ID ? 1 : id + 1
    return id
  }

  /** Acquires `key` with `init` by `start(op)`, for `method` (diagnostics); resolves a Lock, or null when not acquired. */
  async #acquire(key, init, method, start) {
    checkKey(key)
    const id = this.#newId()
    const started = diagnostics.now()
    const begun = diagnostics.begin(this, key, method)
    let completion
    try {
      completion = await this.#operation(start, id)
    } catch (err) {
      diagnostics.publishError(key, undefined, started, err, begun)
      throw atCaller(err)
    }
    if (completion.fence === undefined) {
      diagnostics.publishBusy(key, started, begun)
      return null
    }
    return this.#held(key, id, init, completion, started, begun)
  }

  /** The Lock of acquisition `id` of `key` with `init`, acquired (`completion`) after starting at `started`. */
  #held(key, id, init, completion, started, begun) {
    if (diagnostics.acquire.hasSubscribers) {
      const ms = diagnostics.since(started)
      diagnostics.acquire.publish({ key, fence: completion.fence, ms, direct: this.#native.wentDirect(id), start: begun })
    }
    // Locks are not renewed unless asked to (the native default too); a renewed one keeps the process alive.
    const autoExtend = init?.autoExtend === true
    if (autoExtend) this.#keepAlive.hold()
    const lock = new Lock(key, id, completion, this.#lockOps, begun, () => {
      this.#locks.delete(id)
      if (autoExtend) this.#keepAlive.drop()
    })
    this.#locks.set(id, lock)
    return lock
  }

  /** Runs `fn` under `key` (for `method`, in diagnostics); undefined when not acquired (and not `required`). */
  async #run(key, fn, init, required, method = required ? 'withLock' : 'snatchTask') {
    checkKey(key)
    checkFn(fn)
    let start = init === undefined
      ? (op) => this.#startRun(op, key, required)
      : (op) => this.#startRun(op, key, required, init.ttl, init.minHold, init.autoExtend, init.wait, init.fair)
    // A one-attempt call that does not ask to re-enter comes to the same whoever holds the key: no context needed.
    if (required || init?.reentrant) {
      start = this.#inContext([key], { lock: false, set: false, waits: required, reentrant: init?.reentrant }, start)
    }
    const run = this.#newRun(key, fn, method, this.#finishRun)
    return run.outcome(await this.#runWith(run, start))
  }

  /**
   * Runs `fn` as `holder` of `key` ('permit' of a semaphore of `limit`, 'read' or 'write' of a read-write lock),
   * waiting up to `options.wait` ms (for `method`, in diagnostics): fn's value.
   */
  async #runAs(key, holder, limit, fn, options, method) {
    checkFn(fn)
    const init = lockInit(options, { canWait: true })
    const run = this.#newRun(key, fn, method, this.#finishRun)
    const completion = await this.#runWith(run, (op) => this.#native.runAs(op, key, holder, limit, init))
    return run.outcome(completion).value
  }

  /**
   * The JS side of a run of `fn` under `key` (for `method`, in diagnostics), reported back by `finish(id, run)` once fn
   * settled, with `context` (a set's `keys`) in fn's context.
   */
  #newRun(key, fn, method, finish, context) {
    const run = new Run(key, fn, finish, this.#lockOps.remainingMs, this, method, undefined, context, this.#frames)
    run.linked = this.#frames.held.size > 0
    return run
  }

  /**
   * `start(op)` of a call on `keys` (`call`: `{ lock, set, waits, reentrant }`, snatch-core's `Reentering`), or, when
   * it runs inside the fn of runs of this locker, a start that first has the core decide what it comes to if those
   * runs hold some of its keys (`reenter`: refused, not acquired, or run under the held locks), else starts it so.
   */
  #inContext(keys, call, start) {
    const within = this.#frames.within(this.#runs, keys)
    if (within.length === 0) return start
    const reentering = { keys, lock: call.lock, set: call.set, waits: call.waits, reentrant: call.reentrant === true, within }
    return (op) => {
      if (!this.#native.reenter(op, reentering)) start(op)
    }
  }

  /**
   * Starts `run` of the native lifecycle by `start(op)` and resolves its end; with `signal`, rejects its reason once
   * it aborts (the run goes on when it took its turn: a shared round's).
   */
  async #runWith(run, start, signal) {
    const id = this.#newId()
    this.#runs.set(id, run)
    const told = this.#operation(start, id)
    try {
      const completion = await (signal === undefined ? told : this.#unlessAborted(id, told, signal))
      this.#runs.delete(id)
      return completion
    } catch (err) {
      diagnostics.publishError(run.key, undefined, run.started, err, run.begun)
      if (signal === undefined) this.#runs.delete(id)
      else told.then(() => this.#runs.delete(id), () => this.#runs.delete(id))
      throw atCaller(err)
    }
  }

  /**
   * `told`, the outcome of shared run `id`, or `signal`'s reason once it aborts: the run is then forgotten, unless it
   * took its turn already (its fn still runs, for the round's other callers).
   */
  #unlessAborted(id, told, signal) {
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        if (this.#native.stopWaiting(id)) {
          this.#pending.delete(id)
          this.#keepAlive.drop()
          this.#runs.delete(id)
        }
        reject(signal.reason)
      }
      signal.addEventListener('abort', onAbort, { once: true })
      told.then(
        (outcome) => {
          signal.removeEventListener('abort', onAbort)
          resolve(outcome)
        },
        (err) => {
          signal.removeEventListener('abort', onAbort)
          reject(err)
        },
      )
    })
  }
}

/**
 * A timer that tells `native` that the event loop turns, at least four times per `maxStall` (at most once a second):
 * leases are renewed only while it does. Unref'd, and holding the native locker weakly; null for `maxStall: Infinity`.
 */
function beatsOf(native, maxStall = LIMITS.defaultMaxStallMs) {
  if (maxStall === Infinity) return null
  const ref = new WeakRef(native)
  native.beat()
  const timer = setInterval(() => {
    const alive = ref.deref()
    if (alive === undefined) clearInterval(timer)
    else alive.beat()
  }, Math.max(1, Math.min(1000, Math.floor(maxStall / 4))))
  timer.unref()
  return timer
}

/** Checks a `limit` option: a number in the core's range, when given. */
function checkLimitOption(limit) {
  checkType('limit', limit, 'number')
  if (limit !== undefined) checkRange('limit', limit)
}

module.exports = { Locker, deployment, semaphores, sharedRun, storedSummary }
