'use strict'
// Leader election on a lock: `locker.lead(name, fn)` campaigns by waiting for the lock `name` (withLock), runs fn
// while it holds it (renewed, fenced, its signal aborted before the lease can lapse: the run lifecycle of every
// withLock), and campaigns again when the term ends. `locker.observe(name)` watches who holds it.

const { EventEmitter } = require('node:events')
const { emitError, invalidArg } = require('./errors')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** The key of the Locker's method a campaign waits for its lock with: withLock, told apart in diagnostics ('lead'). */
const campaign = Symbol('redis-snatch campaign')

/** How often an observer asks who leads, in ms. */
const OBSERVE_EVERY_MS = 500

/** Why a term ended, as 'revoked' tells it. */
const REASONS = { returned: 'returned', resigned: 'resigned', stopped: 'stopped', lost: 'lost', error: 'error' }

/**
 * One replica's campaign for `name`: an EventEmitter of 'elected' `{ term, fence }`, 'revoked' `{ term, reason }`
 * (reason: 'returned' when fn settled by itself, 'resigned', 'stopped', 'lost' when the lease could not be kept,
 * 'error' when fn threw) and 'error' (fn's error, or a failed campaign: it goes on after `retry` ms).
 */
class Leadership extends EventEmitter {
  #locker
  #name
  #fn
  #ttl
  #retry
  #self
  #stopped = false
  #warned = false
  /** Aborts the term under way (resign, stop). */
  #ending = null
  #reason = null
  /** Resolves when the term under way has ended. */
  #termEnded = null
  #campaign
  /** The instance id of the leader as last seen (this replica's while it leads). */
  leader = null
  isLeader = false

  /**
   * `self`: this replica's instance id; `ttl` and `retry` (ms between a campaign's looks) as checked by lead();
   * `ended()` is called once the campaign has stopped.
   */
  constructor(locker, name, fn, { ttl, retry, self, ended }) {
    super()
    this.#locker = locker
    this.#name = name
    this.#fn = fn
    this.#ttl = ttl
    this.#retry = retry
    this.#self = self
    this.#campaign = this.#run().finally(ended)
  }

  /** Ends the term under way, if any, and campaigns again after `retry` ms (another replica takes over meanwhile). */
  async resign() {
    await this.#end(REASONS.resigned)
  }

  /** Ends the term under way, if any, and stops campaigning. Resolves once the campaign has stopped. */
  async stop() {
    this.#stopped = true
    await this.#end(REASONS.stopped)
    await this.#campaign
  }

  async #end(reason) {
    if (!this.#ending) return
    this.#reason ??= reason
    this.#ending.abort(new Error(`leadership of '${this.#name}' ${reason}`))
    await this.#termEnded
  }

  async #run() {
    while (!this.#stopped) {
      let term = null
      let pause = 0
      /** @type {(value?: unknown) => void} */
      let finish = () => {}
      try {
        await this.#locker[campaign](
          this.#name,
          async (ctx) => {
            // Elected after stop() was called: hand the lock back at once.
            if (this.#stopped) return
            this.#ending = new AbortController()
            this.#termEnded = new Promise((resolve) => {
              finish = resolve
            })
            term = ctx.fence
            this.isLeader = true
            this.leader = this.#self
            this.emit('elected', { term, fence: term })
            const signal = AbortSignal.any([ctx.signal, this.#ending.signal])
            const leading = { key: ctx.key, fence: ctx.fence, term, signal }
            Object.defineProperty(leading, 'validUntil', { get: () => ctx.validUntil, enumerable: true })
            return this.#fn(leading)
          },
          { ttl: this.#ttl, wait: this.#retry },
        )
      } catch (err) {
        if (term === null && err.code === 'ERR_SNATCH_TIMEOUT') {
          // Not elected within `retry`: note who leads, and campaign again.
          this.leader = (await leaderOf(this.#locker, this.#name).catch(() => null))?.leader ?? null
          continue
        }
        if (err.code === 'ERR_SNATCH_CLOSED') {
          this.#stopped = true
        } else if (err.code === 'ERR_SNATCH_LOCK_LOST') {
          this.#reason ??= REASONS.lost
        } else if (term === null || this.#reason === null) {
          // (fn's rejection after a resign or stop is its answer to the abort, not an error)
          this.#reason = term === null ? null : REASONS.error
          this.#error(err)
        }
        pause = this.#retry
      }
      if (term !== null) {
        const reason = this.#reason ?? REASONS.returned
        this.isLeader = false
        this.leader = null
        this.#ending = null
        this.#reason = null
        this.emit('revoked', { term, reason })
        finish()
        // Others campaign meanwhile: after a resign one of them takes over, and a fn that returns at once does not
        // make a loop of terms.
        pause = this.#retry
      }
      if (pause && !this.#stopped) await sleep(pause)
    }
  }

  /** Emits 'error'; without a listener, logs the first one to stderr instead of crashing the process. */
  #error(err) {
    this.#warned = emitError(this, this.#warned, `leadership of '${this.#name}' failed`, err)
  }
}

/**
 * Who leads `name`, as seen by asking Redis every OBSERVE_EVERY_MS: an EventEmitter of 'change' `{ leader, term }`
 * when the leader changes (leader: the holder's instance id, or null; term: the key's fence counter as read then,
 * at least the leader's term, as campaigns count it up too; null without a leader) and 'error'.
 */
class LeaderObserver extends EventEmitter {
  #locker
  #name
  #onClose
  #closed = false
  #timer = null
  leader = null
  term = null

  /** `onClose()` is called when the observer is closed. */
  constructor(locker, name, onClose) {
    super()
    this.#locker = locker
    this.#name = name
    this.#onClose = onClose
    this.#look()
  }

  /** Stops watching. */
  close() {
    if (this.#closed) return
    this.#closed = true
    clearTimeout(this.#timer)
    this.#onClose()
  }

  async #look() {
    try {
      const { leader, term } = (await leaderOf(this.#locker, this.#name)) ?? { leader: null, term: null }
      if (!this.#closed && leader !== this.leader) {
        this.leader = leader
        this.term = term
        this.emit('change', { leader, term })
      }
    } catch (err) {
      if (!this.#closed && this.listenerCount('error') > 0) this.emit('error', err)
    }
    if (!this.#closed) this.#timer = setTimeout(() => this.#look(), OBSERVE_EVERY_MS)
  }
}

/** Who holds the lock `name` now, by `locker.inspect`: `{ leader, term }` (its holder, its fence counter) or null. */
async function leaderOf(locker, name) {
  const held = await locker.inspect(name)
  return held !== null && held.ttl > 0 ? { leader: held.holder, term: held.fence } : null
}

const MAX_MS = 2 ** 31 - 1

/**
 * lead()'s options checked: `ttl` (as every lock's: an integer in [5, 2^31 - 1] ms, config.rs validate_ttl; thrown
 * here rather than failing each campaign) and `retry` (an integer of ms, at least 1; `retryFallback` if not given).
 * @param {{ ttl?: number, retry?: number }} options
 * @param {number} retryFallback
 */
function leadOptions({ ttl, retry }, retryFallback) {
  if (ttl !== undefined && !(Number.isSafeInteger(ttl) && ttl >= 5 && ttl <= MAX_MS)) {
    throw invalidArg(RangeError, `ttl must be an integer number of milliseconds in [5, ${MAX_MS}], got ${ttl}`)
  }
  if (retry !== undefined && !(Number.isSafeInteger(retry) && retry >= 1 && retry <= MAX_MS)) {
    throw invalidArg(RangeError, `retry must be an integer number of milliseconds in [1, ${MAX_MS}], got ${retry}`)
  }
  return { ttl, retry: retry ?? retryFallback }
}

module.exports = { Leadership, LeaderObserver, leadOptions, campaign }
