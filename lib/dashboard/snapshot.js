'use strict'
// What the dashboard shows, read from Redis at most once per `refreshMs` however many pages are open (they share it):
// the fleet's schedules, the locks and semaphores held and the deployment, as the locker answers them (index.js writes them as JSON:
// times in epoch ms, fences as decimal strings). A read that fails keeps the last good one, marked with the error.

const { deployment, semaphores } = require('../locker')
const { LIMITS } = require('../native')

/** Most locks listed: as locks() does. */
const LOCKS_LIMIT = LIMITS.defaultListLimit
/** Records of a schedule's timeline. */
const HISTORY_LIMIT = 40

class Snapshot {
  #locker
  #refreshMs
  /** The last state read, or being read. */
  #state = null
  #readAt = 0
  #reading = null
  /** Each schedule's records: `name` → `{ at, records }`, read when a page asks. */
  #histories = new Map()

  constructor(locker, refreshMs) {
    this.#locker = locker
    this.#refreshMs = refreshMs
  }

  /** The state, read again if older than `refreshMs`. */
  async state() {
    if (this.#reading) return this.#reading
    if (this.#state && Date.now() - this.#readAt < this.#refreshMs) return this.#state
    this.#reading = this.#read().finally(() => (this.#reading = null))
    return this.#reading
  }

  /** The next `state()` reads Redis again (after an action). */
  invalidate() {
    this.#readAt = 0
    this.#histories.clear()
  }

  /** Schedule `name`'s newest records; read again if older than `refreshMs`. */
  async history(name) {
    const cached = this.#histories.get(name)
    if (cached && Date.now() - cached.at < this.#refreshMs) return cached.records
    const records = await this.#locker.history(name, { limit: HISTORY_LIMIT })
    if (this.#histories.size > 100) this.#histories.clear()
    this.#histories.set(name, { at: Date.now(), records })
    return records
  }

  async #read() {
    const at = Date.now()
    try {
      const [schedules, locks, held, connection] = await Promise.all([
        this.#locker.schedules(),
        this.#locker.locks({ limit: LOCKS_LIMIT }),
        this.#locker[semaphores](LOCKS_LIMIT),
        this.#locker[deployment](),
      ])
      this.#state = {
        at,
        ok: true,
        connection,
        schedules,
        locks,
        semaphores: held,
        locksLimit: LOCKS_LIMIT,
      }
    } catch (err) {
      const last = this.#state ?? { schedules: [], locks: [], semaphores: [], connection: null, locksLimit: LOCKS_LIMIT }
      this.#state = { ...last, at, ok: false, error: `${err.name}: ${err.message}` }
    }
    this.#readAt = Date.now()
    return this.#state
  }
}

module.exports = { Snapshot }
