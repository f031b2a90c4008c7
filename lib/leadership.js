'use strict'
// Leaders: `locker.lead(name, fn)` and `locker.observe(name)` over the native campaign and observer (the core's
// lead/): the campaign, its terms (each a run of the one lifecycle), why each ended, and who leads are decided there;
// these deliver them as events.

const { EventEmitter } = require('node:events')
const diagnostics = require('./diagnostics')
const { LIMITS } = require('./native')
const { emitError, native } = require('./errors')
const { Run } = require('./run')

/**
 * One replica's campaign for `name`: an EventEmitter of 'elected' `{ term, fence }`, 'revoked' `{ term, reason }`
 * (reason: 'returned' when fn settled by itself, 'resigned', 'stopped', 'lost' when the lease could not be kept,
 * 'error' when fn threw) and 'error' (fn's error, or a failed campaign: it goes on after `retry` ms).
 */
class Leadership extends EventEmitter {
  #name
  #fn
  #native
  #locker
  #hooks
  #warned = false
  /** This campaign's wait for the lock under way, as diagnostics published it (method 'lead'). */
  #waiting
  #waitingSince = 0
  /** Keeps the process alive while it campaigns, as a timer would. */
  #alive
  #ended
  /** The instance id of the leader as last seen (this replica's while it leads). */
  leader = null
  isLeader = false

  /**
   * @internal Built by `locker` around its native campaign: `hooks` are the locker's (`self` its instanceId, `runs`
   * its runs by id, `taskDone`, `remainingMs`); `ended()` is called once the campaign has stopped.
   */
  constructor(locker, name, fn, nativeCampaign, hooks, ended) {
    super()
    this.#locker = locker
    this.#name = name
    this.#fn = fn
    this.#native = nativeCampaign
    this.#hooks = hooks
    this.#ended = ended
    this.#alive = setInterval(() => this, LIMITS.maxDurationMs)
    this.#wait()
  }

  /** Ends the term under way, if any, and campaigns again after `retry` ms (another replica takes over meanwhile). */
  async resign() {
    await native(this.#native.resign())
    await this.#termEnded()
  }

  /** Ends the term under way, if any, and stops campaigning. Resolves once the campaign has stopped. */
  async stop() {
    await native(this.#native.stop())
    await this.#termEnded()
    this._closed()
  }

  /**
   * Once the native call has ended the term, its end may still be on its way here (the term's events and the call's
   * answer reach JavaScript by separate queues): waits for it, so that `isLeader` is false when the call resolves.
   */
  async #termEnded() {
    if (this.isLeader) await new Promise((resolve) => this.once('revoked', resolve))
  }

  /** @internal The campaign ended (stopped, or its locker closed). */
  _closed() {
    clearInterval(this.#alive)
    this.#ended()
  }

  /** @internal Elected: the term's fn is called as run `id`, under `fence` (the term). */
  _term(id, fence) {
    const { runs, taskDone, remainingMs, self } = this.#hooks
    const finish = (runId, run) => taskDone(runId, run.failure())
    const run = new Run(this.#name, this.#fn, finish, remainingMs, this.#locker, 'lead', this.#waiting)
    run.started = this.#waitingSince
    runs.set(id, new Term(run, (termFence, reason) => this.#revoked(run, termFence, reason)))
    this.isLeader = true
    this.leader = self
    this.emit('elected', { term: fence, fence })
    run.task(id, fence, { term: fence })
  }

  /** @internal Not elected within `retry`: who leads (`{ leader, term }`, or undefined without a leader). */
  _leader(seen) {
    if (this.#waiting !== undefined) diagnostics.publishBusy(this.#name, this.#waitingSince, this.#waiting)
    this.leader = this.isLeader ? this.leader : (seen?.leader ?? null)
    this.#wait()
  }

  /** @internal The campaign met `err` (Redis unreachable, say); it goes on after `retry`. */
  _erred(err) {
    if (this.#waiting !== undefined) diagnostics.publishError(this.#name, undefined, this.#waitingSince, err, this.#waiting)
    this.#error(err)
    this.#wait()
  }

  /** The term of `run` ended, for `reason` (decided natively), its lock given back. */
  #revoked(run, fence, reason) {
    run.ended(reason === 'lost')
    this.isLeader = false
    this.leader = null
    this.emit('revoked', { term: fence, reason })
    if (reason === 'error') this.#error(run.did().error)
    this.#wait()
  }

  /** A wait for the lock begins (for diagnostics: each campaign not elected within `retry` is a busy wait). */
  #wait() {
    this.#waitingSince = diagnostics.now()
    this.#waiting = diagnostics.begin(this.#locker, this.#name, 'lead')
  }

  /** Emits 'error'; without a listener, logs the first one to stderr instead of crashing the process. */
  #error(err) {
    this.#warned = emitError(this, this.#warned, `leadership of '${this.#name}' failed`, err)
  }
}

/** A term's run, as the locker's runs hold it: its loss and abort are the run's, its end the campaign's. */
class Term {
  #run
  #revoked

  /** `revoked(fence, reason)` hears the term's end. */
  constructor(run, revoked) {
    this.#run = run
    this.#revoked = revoked
  }

  lost(reason) {
    this.#run.lost(reason)
  }

  aborted(reason) {
    this.#run.aborted(reason)
  }

  /** The term ended (`kind` Revoked): under `fence`, for `reason`. */
  end(_kind, fence, reason) {
    this.#revoked(fence, reason)
  }
}

/**
 * Who leads `name`, as the native observer hears it (each change is published by the campaigns; a leader that died is
 * seen when its lease ends): an EventEmitter of 'change' `{ leader, term }` (leader: the holder's instance id, or
 * null; term: its term, the fence of its lock, null when not known) and 'error'.
 */
class LeaderObserver extends EventEmitter {
  #native
  #closed = false
  #ended
  /** Keeps the process alive until closed, as a timer would. */
  #alive
  leader = null
  term = null

  /** @internal Built by the locker around its native observer; `ended()` is called when the observer is closed. */
  constructor(nativeObserver, ended) {
    super()
    this.#native = nativeObserver
    this.#ended = ended
    this.#alive = setInterval(() => this, LIMITS.maxDurationMs)
  }

  /** Stops watching. */
  close() {
    if (this.#closed) return
    this._closed()
    this.#native.close().catch(() => {})
  }

  /** @internal Closed, or its locker closed. */
  _closed() {
    this.#closed = true
    clearInterval(this.#alive)
    this.#ended()
  }

  /** @internal The leader changed: `{ leader, term }`, or undefined without one. */
  _leader(seen) {
    if (this.#closed) return
    this.leader = seen?.leader ?? null
    this.term = seen?.term ?? null
    this.emit('change', { leader: this.leader, term: this.term })
  }

  /** @internal Watching met `err`; it goes on. */
  _erred(err) {
    if (!this.#closed && this.listenerCount('error') > 0) this.emit('error', err)
  }
}

module.exports = { Leadership, LeaderObserver }
