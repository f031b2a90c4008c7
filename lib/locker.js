'use strict'

const { NativeLocker, OutcomeKind } = require('./native')
const diagnostics = require('./diagnostics')
const { LockLostError, LockTimeoutError, fromNative, fromNativeError, invalidArg } = require('./errors')
const { KeepAlive } = require('./keep-alive')
const { Lock, withHeld, lostError, heldContext } = require('./lock')
const { MultiLock, checkKeys } = require('./multi-lock')
const { sharedOptions, encodeValue, decodeValue, encodeError, decodeError } = require('./shared')
const {
  lockerInit,
  lockInit,
  scheduleInit,
  closeDrain,
  checkKey,
  checkFn,
  checkString,
  checkType,
  snapshot,
} = require('./options')
const { heldLock, occurrenceRecord, scheduleInfo } = require('./fleet')
const { Leadership, LeaderObserver, campaign, leadOptions } = require('./leadership')
const { ReadWriteLock } = require('./read-write-lock')
const { Run } = require('./run')
const { ScheduledTask } = require('./schedule')
const { Semaphore, checkLimit } = require('./semaphore')

/** What the native side tells, defined once in the binding (src/delivery.rs, `OutcomeKind`). */
const CALL = OutcomeKind.Call
const LOST = OutcomeKind.Lost
const ABORTED = OutcomeKind.Aborted
const FAILED = OutcomeKind.Failed
const SKIPPED = OutcomeKind.Skipped
const UNCLAIMED = OutcomeKind.Unclaimed
const MISSED = OutcomeKind.Missed
const STORED = OutcomeKind.Stored

/** The keys of the Locker's methods that only the dashboard asks (lib/dashboard): the deployment, the semaphores. */
const deployment = Symbol('redis-snatch deployment')
const semaphores = Symbol('redis-snatch semaphores')
/** The key of the Locker's method that shared() and redis-snatch/idempotency take a turn with. */
const sharedTurn = Symbol('redis-snatch shared turn')

/** The ids the facade gives its operations and schedules: below 2^31 (the native side numbers its own runs above). */
const MAX_ID = 2 ** 31 - 1
/** lead()'s default `retry`, in ms. */
const DEFAULT_RETRY_MS = 1000

/**
 * The native side's delivery, `deliver(kind, id, fence, extra)`: every outcome of an operation (it settles the
 * operation's promise with `{ kind, fence, extra }`), of a run (call its fn, abort its signal), of a held lock (its
 * loss) and of a schedule (its occurrences' fns and events); kinds and their arguments: the binding's `OutcomeKind`.
 * Made outside the Locker so that it does not hold the Locker (the native side keeps it for as long as the locker
 * lives, and closures made in one function share their captured variables): an unreachable Locker is collected, and
 * then closed.
 */
function deliverTo(pending, runs, locks, schedules, keepAlive) {
  return (kind, id, fence, extra) => {
    switch (kind) {
      case CALL:
        if (extra === undefined) runs.get(id).task(id, fence)
        else schedules.get(extra.schedule)?._occurrence(id, extra, fence)
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
      // The end of a schedule's occurrence: its run is the schedule's, not an operation of the facade's.
      const occurrence = runs.get(id)
      runs.delete(id)
      occurrence?.end(kind, fence, extra)
      return
    }
    pending.delete(id)
    keepAlive.drop()
    if (kind === FAILED) settle.reject(fromNativeError(extra))
    else settle.resolve({ kind, fence, extra })
  }
}

/** Acquires locks and runs tasks under them, on one Redis (`url`) or a Redlock set (`urls`). */
class Locker {
  #native
  #nextId = 1
  /** Operation id → its promise's settlers. */
  #pending = new Map()
  /** Run id → its Run, which the native side has call the fn and hear of loss (a schedule's occurrences too). */
  #runs = new Map()
  /** Schedule id → its ScheduledTask. */
  #schedules = new Map()
  /** Campaigns (lead) and observers (observe) under way, which close() ends. */
  #leaderships = new Set()
  #observers = new Set()
  /** This replica's name in lock values (`instanceId`). */
  #instanceId
  /** Key → the shared() round under way in this process, which its other callers here wait for. */
  #rounds = new Map()
  /** Acquisition id → a Lock not yet released or lost. */
  #locks = new Map()
  /** Alive while operations are pending or autoExtend locks are held. */
  #keepAlive = new KeepAlive()
  /** Tells the native side that the event loop turns (see `maxStall`); null when nothing watches it. */
  #beats = null
  /** The native operations a Lock uses. */
  #lockOps
  /** Starts a run: `(id, key, required, ttl?, minHold?, autoExtend?, wait?)`. */
  #startRun
  /** Tells the native side that the fn of run `id` has settled: `(id)`. */
  #taskDone
  /** Starts a one-attempt acquisition: `(id, key, ttl?, minHold?, autoExtend?)`. */
  #startTryLock
  /** Whether the lock of run or lock `id` was taken by a direct call: `(id)`. */
  #wentDirect

  constructor(options) {
    const init = lockerInit(options)
    this.#instanceId = init.instanceId
    const deliver = deliverTo(this.#pending, this.#runs, this.#locks, this.#schedules, this.#keepAlive)
    try {
      this.#native = new NativeLocker(init, deliver)
    } catch (err) {
      throw fromNative(err)
    }
    // Plain functions rather than methods: every run calls the first two, every tryLock cycle the others, and a
    // native method call costs several times as much (their signatures: the binding's RunCalls).
    this.#beats = beatsOf(this.#native, init.maxStall)
    const calls = this.#native.runCalls()
    ;({ startRun: this.#startRun, taskDone: this.#taskDone, startTryLock: this.#startTryLock } = calls)
    const { startRelease } = calls
    const native = this.#native
    this.#wentDirect = (id) => native.wentDirect(id)
    this.#lockOps = {
      extend: (id, ttl) => this.#call((op) => this.#native.extend(op, id, ttl)),
      release: (id) => this.#call((op) => startRelease(op, id)),
      remainingMs: (id) => this.#native.remainingMs(id),
      handOff: (id) => {
        try {
          return this.#native.handOff(id)
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

  /** withLock for a leader's campaign (lib/leadership.js): the same, told apart in diagnostics as method 'lead'. */
  async [campaign](key, fn, options) {
    const outcome = await this.#run(key, fn, lockInit(options, { canWait: true }), true, 'lead')
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
    return this.#acquire(key, init, 'lock', (op) => this.#native.acquire(op, key, init))
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
    const deadline = Date.now() + o.wait
    for (;;) {
      let round = this.#rounds.get(key)
      const mine = round === undefined
      if (mine) {
        round = this.#sharedRound(key, fn, o, deadline - Date.now())
        const forget = () => this.#rounds.get(key) === round && this.#rounds.delete(key)
        round.then(forget, forget)
        this.#rounds.set(key, round)
      }
      let outcome
      try {
        // This caller's own bounds apply while it waits; its own round's fn, once running, is not cut short by them.
        outcome = await (mine ? aborted(round, o.signal) : bounded(round, o.signal, deadline, key, o.wait))
      } catch (err) {
        if (!mine && err?.code === 'ERR_SNATCH_TIMEOUT' && Date.now() < deadline) continue
        throw err
      }
      if (mine) {
        if (outcome.own.threw) throw outcome.own.error
        return outcome.own.value
      }
      if (outcome.entry?.error) throw decodeError(outcome.entry.bytes)
      if (outcome.entry) return decodeValue(outcome.entry.bytes, o)
      // That round stored nothing (its runner lost its lease): another one, while there is time.
      if (Date.now() >= deadline) throw sharedTimeout(key, o.wait)
    }
  }

  /**
   * One round of shared() in this process: the turn at `key` (waiting up to `waitMs`), then, holding the lock, fn
   * run, its value or error stored and the lock released. Resolves `{ entry, own }`: what is stored (`{ error, bytes
   * }`, or null), and for the caller that started it, what fn came to: `{ threw, error, value }`.
   */
  async #sharedRound(key, fn, o, waitMs) {
    const turn = await this[sharedTurn](key, { ...o.lock, wait: Math.max(0, waitMs) }, o.storeErrors, 'shared')
    if (turn.stored) {
      const entry = turn.stored
      const own = entry.error ? { threw: true, error: decodeError(entry.bytes) } : { threw: false, value: decodeValue(entry.bytes, o) }
      return { entry, own }
    }
    const { lock, store } = turn
    let own
    try {
      own = { threw: false, value: await lock._wrap(() => fn(heldContext(lock, key))) }
    } catch (error) {
      own = { threw: true, error }
    }
    let payload
    try {
      payload = own.threw ? encodeError(own.error) : encodeValue(own.value, o)
    } catch (error) {
      own = { threw: true, error }
      payload = encodeError(error)
    }
    const lost = lostError(lock, key, own)
    const stored = !lost && (await store(own.threw, payload, o.resultTtl).catch(() => false))
    await lock.release().catch(() => {})
    return { entry: stored ? { error: own.threw, bytes: payload } : null, own: lost ? { threw: true, error: lost } : own }
  }

  /**
   * A turn at the shared result of `key` (for `method`, in diagnostics), for shared() and redis-snatch/idempotency
   * (not public API): waits up to `init.wait` for a run under way, then resolves `{ stored: { error, bytes } }`, or
   * `{ lock, store(error, bytes, ttlMs) }`: the Lock to compute the result under, and how to store it while the lock
   * is ours (resolves whether it was). `storeErrors`: take a stored error of any run.
   */
  async [sharedTurn](key, init, storeErrors, method) {
    const id = this.#newId()
    const started = diagnostics.now()
    const begun = diagnostics.begin(this, key, method)
    const turn = await this.#call((op) => this.#native.shared(op, key, init, storeErrors), id)
    if (turn.kind === STORED) return { stored: { error: turn.extra.error, bytes: turn.extra.bytes } }
    const lock = this.#held(key, id, init, turn, started, begun)
    const store = (error, bytes, ttl) => this.#call((op) => this.#native.storeShared(op, id, error, bytes, ttl)).then((s) => s.extra)
    return { lock, store }
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
    let completions
    try {
      // Told together: every lock, or the set's error to each.
      completions = await Promise.all(this.#callAll(ids, () => this.#native.lockAll(ids, list, init)))
    } catch (err) {
      list.forEach((key, i) => diagnostics.publishError(key, undefined, started, err, begun[i]))
      throw err
    }
    const locks = list.map((key, i) => this.#held(key, ids[i], init, completions[i], started, begun[i]))
    return new MultiLock(list, locks)
  }

  /**
   * lockAll(keys, options), then `fn({ signal, fences, keys, fence, key, validUntil })` (`fences[i]` is `keys[i]`'s;
   * `fence` and `key` the first key's), renewed while fn runs unless `autoExtend: false`, then every lock released.
   * Resolves fn's value; fn's error, or LockLostError when a lease was lost.
   */
  async withLocks(keys, fn, options) {
    const list = checkKeys(keys)
    return withHeld(list[0], (init) => this.lockAll(list, init), fn, options, (held) => ({
      signal: held.signal,
      fences: held.fences,
      keys: held.keys,
      fence: held.fences[0],
      key: held.keys[0],
      get validUntil() {
        return held.validUntil
      },
    }))
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
    const { ttl, retry } = leadOptions(o, DEFAULT_RETRY_MS)
    const ended = () => this.#leaderships.delete(leadership)
    const leadership = new Leadership(this, name, fn, { ttl, retry, self: this.#instanceId, ended })
    this.#leaderships.add(leadership)
    return leadership
  }

  /** Watches who leads `name` (who holds the lock `name`) without campaigning; `close()` the observer when done. */
  observe(name) {
    checkKey(name)
    const observer = new LeaderObserver(this, name, () => this.#observers.delete(observer))
    this.#observers.add(observer)
    return observer
  }

  /**
   * A counting semaphore: at most `limit` holders of `key` at once, across every process; each permit is a Lock.
   * One Redis, Sentinel or Cluster (not Redlock). A lock and a semaphore must not share a key.
   */
  semaphore(key, limit) {
    checkKey(key)
    checkLimit(limit)
    return new Semaphore(key, limit, (init, wait) =>
      this.#acquire(key, init, wait ? 'acquire' : 'tryAcquire', (op) =>
        this.#native.acquirePermit(op, key, limit, init, wait),
      ),
    )
  }

  /**
   * A read-write lock: many readers or one writer of `key` at once, across every process; each read or write lock
   * is a Lock. One Redis, Sentinel or Cluster (not Redlock). A lock, a semaphore and a read-write lock must not share
   * a key.
   */
  rwlock(key) {
    checkKey(key)
    return new ReadWriteLock(key, (write, init, wait) =>
      this.#acquire(key, init, write ? 'write' : 'read', (op) =>
        this.#native.acquireReadWrite(op, key, write, init, wait),
      ),
    )
  }

  /** What Redis holds for `key` now, for dashboards and debugging: `null` when it is free. */
  async inspect(key) {
    checkKey(key)
    const { fence, extra } = await this.#call((op) => this.#native.inspect(op, key))
    if (fence === undefined) return null
    return { ttl: extra.ttl, fence, holders: extra.holders, holder: extra.holder ?? null }
  }

  /**
   * Deletes `key`'s lock whoever holds it (an operator's tool) and wakes its waiters; true when there was one. The
   * holder's next extension is refused and its signal aborts.
   */
  async forceRelease(key) {
    checkKey(key)
    return (await this.#call((op) => this.#native.forceRelease(op, key))).extra
  }

  /** Every schedule a live replica registered, fleet-wide (none needs to be registered in this process), by name. */
  async schedules() {
    return (await this.#ask({ kind: 'schedules' })).map(scheduleInfo)
  }

  /** Schedule `name`'s newest records, newest first: `limit` of them at most (default 50). */
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
    for (const observer of [...this.#observers]) observer.close()
    // From now on nothing new is taken; a leader's term, which runs until it is told to stop, steps down.
    const closed = this.#call((op) => this.#native.close(op, drainMs))
    await Promise.all([...this.#leaderships].map((leadership) => leadership.stop()))
    await closed
    clearInterval(this.#beats ?? undefined)
    for (const lock of this.#locks.values()) lock._released()
    for (const schedule of this.#schedules.values()) schedule._closed()
  }

  /**
   * Starts a native operation under `id` (`start(id)` may throw for bad input) and resolves its outcome
   * (`{ kind, fence, extra }`), which may be told while `start` runs. The process stays alive while it is pending.
   */
  #call(start, id = this.#newId()) {
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

  /**
   * Starts a native operation told under each of `ids` (`start()` may throw for bad input); the outcome of each, as
   * `#call` resolves one.
   */
  #callAll(ids, start) {
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

  /** Asks the fleet `question` (the binding's `FleetQuestion`); its answer, parsed. */
  async #ask(question) {
    const { extra } = await this.#call((op) => this.#native.ask(op, question))
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
      completion = await this.#call(start, id)
    } catch (err) {
      diagnostics.publishError(key, undefined, started, err, begun)
      throw err
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
      diagnostics.acquire.publish({ key, fence: completion.fence, ms, direct: this.#wentDirect(id), start: begun })
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
    const id = this.#newId()
    const run = new Run(key, fn, this.#taskDone, this.#wentDirect, this.#lockOps.remainingMs, this, method)
    this.#runs.set(id, run)
    let completion
    try {
      completion = await this.#call(
        (op) =>
          init === undefined
            ? this.#startRun(op, key, required)
            : this.#startRun(op, key, required, init.ttl, init.minHold, init.autoExtend, init.wait, init.fair),
        id,
      )
    } catch (err) {
      diagnostics.publishError(key, undefined, run.started, err, run.begun)
      throw err
    } finally {
      this.#runs.delete(id)
    }
    return run.outcome(completion)
  }
}

/** The error of a shared() caller that did not get `key`'s result within its `wait` ms. */
function sharedTimeout(key, wait) {
  return new LockTimeoutError(`could not get the shared result of '${key}' within ${wait} ms`)
}

/** `promise`, or `signal`'s reason once it aborts. */
function aborted(promise, signal) {
  return signal === undefined ? promise : bounded(promise, signal, Infinity)
}

/** `promise`, or `signal`'s reason once it aborts, or a LockTimeoutError at `deadline` (epoch ms). */
function bounded(promise, signal, deadline, key, wait) {
  return new Promise((resolve, reject) => {
    const done = (settle) => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
      settle()
    }
    const onAbort = () => done(() => reject(signal.reason))
    const timer =
      deadline === Infinity
        ? undefined
        : setTimeout(
            () => done(() => reject(sharedTimeout(key, wait))),
            Math.max(0, deadline - Date.now()),
          )
    signal?.addEventListener('abort', onAbort, { once: true })
    promise.then(
      (value) => done(() => resolve(value)),
      (err) => done(() => reject(err)),
    )
  })
}

/** The native side's default `maxStall`, in ms. */
const DEFAULT_MAX_STALL_MS = 30_000

/**
 * A timer that tells `native` that the event loop turns, at least four times per `maxStall` (at most once a second):
 * leases are renewed only while it does. Unref'd, and holding the native locker weakly; null for `maxStall: Infinity`.
 */
function beatsOf(native, maxStall = DEFAULT_MAX_STALL_MS) {
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

/** Checks a `limit` option: a positive integer, when given. */
function checkLimitOption(limit) {
  checkType('limit', limit, 'number')
  if (limit !== undefined && !(Number.isSafeInteger(limit) && limit > 0 && limit <= 2 ** 32 - 1)) {
    throw invalidArg(RangeError, `limit must be a positive integer, got ${limit}`)
  }
}

module.exports = { Locker, deployment, semaphores, sharedTurn }
