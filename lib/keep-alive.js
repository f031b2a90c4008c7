'use strict'

/**
 * Keeps the Node process alive while something counts on a background activity the event loop cannot see (a
 * lease renewed by the native core), the way a pending timer would. Counted: alive while `hold` calls outnumber
 * `drop` calls.
 */
class KeepAlive {
  #count = 0
  #timer = null

  hold() {
    if (this.#count++ === 0) this.#timer = setInterval(() => {}, 2 ** 31 - 1)
  }

  drop() {
    if (--this.#count === 0) {
      clearInterval(this.#timer)
      this.#timer = null
    }
  }
}

module.exports = { KeepAlive }
