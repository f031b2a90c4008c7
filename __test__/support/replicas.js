'use strict'
// Replica processes of one test, forked from a script, and every event they report over IPC (`{ event, pid, ... }`).
// `children` holds those that have not exited.

const { fork } = require('node:child_process')

/** How long `next` waits for an event, at most. */
const WAIT_MS = 50_000

class Replicas {
  children = new Map()
  events = []
  #waiters = []
  #script
  #execArgv

  /** Replicas of `script`, forked with node options `execArgv`. */
  constructor(script, { execArgv = [] } = {}) {
    this.#script = script
    this.#execArgv = execArgv
  }

  /**
   * Starts `count` replicas with `env` added to this process's environment, sending each `message` (if given);
   * resolves their pids once each reported `ready`.
   */
  async start(count, { env = {}, message } = {}) {
    const started = []
    for (let i = 0; i < count; i++) {
      const child = fork(this.#script, { env: { ...process.env, ...env }, execArgv: this.#execArgv })
      child.on('message', (event) => this.#heard(event))
      child.once('exit', () => this.children.delete(child.pid))
      this.children.set(child.pid, child)
      if (message !== undefined) child.send(message)
      started.push(this.next((e) => e.event === 'ready' && e.pid === child.pid, 'a replica to start'))
    }
    return (await Promise.all(started)).map((e) => e.pid)
  }

  /** Resolves the first event, already heard or to come, for which `match` holds; rejects after WAIT_MS. */
  next(match, what) {
    const seen = this.events.find(match)
    if (seen) return Promise.resolve(seen)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), WAIT_MS)
      this.#waiters.push({ match, resolve: (e) => (clearTimeout(timer), resolve(e)) })
    })
  }

  /** The events heard for which `match` holds. */
  all(match) {
    return this.events.filter(match)
  }

  /** Sends `message` to replica `pid`. */
  send(pid, message) {
    this.children.get(pid).send(message)
  }

  /** Sends `signal` (default SIGKILL) to replica `pid`; resolves its exit code and signal once it exited. */
  async kill(pid, signal = 'SIGKILL') {
    const child = this.children.get(pid)
    const exited = new Promise((resolve) => child.once('exit', (code, by) => resolve({ code, signal: by })))
    child.kill(signal)
    return exited
  }

  /** Asks every replica still running to stop with `message` and waits for them to exit. */
  async stop(message) {
    await Promise.all(
      [...this.children.values()].map((child) => {
        const exited = new Promise((resolve) => child.once('exit', resolve))
        if (child.connected) child.send(message)
        else child.kill('SIGKILL')
        return exited
      }),
    )
  }

  /** SIGKILLs every replica still running. */
  async killAll() {
    for (const pid of [...this.children.keys()]) await this.kill(pid)
  }

  #heard(event) {
    this.events.push(event)
    this.#waiters = this.#waiters.filter((w) => !(w.match(event) && (w.resolve(event), true)))
  }
}

module.exports = { Replicas }
