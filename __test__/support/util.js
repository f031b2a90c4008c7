'use strict'
// Small helpers shared by the Jest tests.

let n = 0

/** A key (or schedule name) no other test, process or earlier run against a shared REDIS_URL uses. */
function uniqueKey(name) {
  return `${name}:${process.pid}:${Date.now()}:${n++}`
}

/** Resolves after `ms` milliseconds. */
function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

module.exports = { uniqueKey, sleep }
