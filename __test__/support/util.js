'use strict'
// Small helpers shared by the Jest tests.

let n = 0

/** A key (or schedule name) no other test, process or earlier run against a shared REDIS_URL uses. */
function uniqueKey(name) {
  return `${name}:${process.pid}:${Date.now()}:${n++}`
}

/** This process's default instance id (`instanceId`), as lockers name it in a lock's value. */
const INSTANCE = `${require('node:os').hostname()}:${process.pid}`

/** What a lock's key holds for `lock` (or a token) of this process: its token, then the instance. */
function heldBy(lock) {
  return `${typeof lock === 'string' ? lock : lock.token}:${INSTANCE}`
}

/** Resolves after `ms` milliseconds: to let time pass (a lease run out), never to wait for another party (`until`). */
function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/**
 * Resolves once `check()` resolves true, reading it every 20 ms; rejects naming `what` after `ms` (a deadline, not a
 * guess of how long it takes: a busy machine only makes the wait longer).
 */
async function until(check, what, ms = 10_000) {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(20)
  }
}

/**
 * Calls `call(fn)` while `server` is paused (SIGSTOP), `fn` being a task that records whether it ran; resumes the
 * server once the call settled. The error the call rejected with (or its value), and whether the task ran.
 */
async function whilePaused(server, call) {
  let ran = false
  server.pause()
  try {
    const err = await call(() => {
      ran = true
    }).catch((e) => e)
    return { err, ran }
  } finally {
    server.resume()
  }
}

/** Resolves the first `event` of `emitter` whose argument satisfies `accept`. */
function next(emitter, event, accept = () => true) {
  return new Promise((resolve) => {
    const listener = (info) => {
      if (!accept(info)) return
      emitter.off(event, listener)
      resolve(info)
    }
    emitter.on(event, listener)
  })
}

module.exports = { INSTANCE, heldBy, next, uniqueKey, sleep, until, whilePaused }
