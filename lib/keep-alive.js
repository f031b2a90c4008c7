'use strict'

const { LIMITS } = require('./native')

/**
 * Keeps the Node process alive while something counts on work the event loop cannot see (a native operation in
 * flight, a lease renewed by the native core), the way a pending timer would. Counted: alive while `hold` calls
 * outnumber `drop` calls. One timer, ref'd and unref'd, so holding is cheap.
 */
class KeepAlive {
  #count = 0
  #timer = null

  hold() {
    if (this.#count++ === 0) {
      this.#timer ??= setInterval(() => {}, LIMITS.maxDurationMs)
      this.#timer.ref()
    }
  }

  drop() {
    if (--this.#count === 0) this.#timer.unref()
  }
}

module.exports = { KeepAlive }
