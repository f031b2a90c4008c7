'use strict'
// `npm run chaos`: the safety suite. Worker processes (chaos/worker.js) loop critical sections on shared keys against
// redis-servers this script starts on loopback, while faults are injected, one scenario after another; then the
// sections are checked (chaos/checker.js) for overlapping holders and fences out of order, and a table per scenario
// is printed and written to docs/SAFETY.md between its RESULTS markers. The fenced-write scenarios (chaos/stock.js)
// write to a Postgres or MariaDB they start, and are audited there; their table goes between the FENCED RESULTS
// markers. Bounded: it stops by itself (about six minutes); `--only a,b` runs some scenarios, `--scale N` multiplies
// their durations.

const { fork } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { ensureBuilt } = require('../scripts/ensure-built')
const { redisCommand, startRedis } = require('../__test__/support/redis-server')
const { startProxy } = require('./proxy')
const { check, takeovers, percentile } = require('./checker')
const { stockScenario, renderStock } = require('./stock')

const root = path.join(__dirname, '..')
const SAFETY = path.join(root, 'docs', 'SAFETY.md')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const nowNs = () => process.hrtime.bigint()

/** The workers of one scenario: spawned, killed, stopped, paused, and what they reported. */
class Workers {
  constructor() {
    this.children = new Map()
    this.sections = []
    // `${worker id} ${key} ${fence}` -> a section under way ({ worker, key, fence, enter }). By fence too: a worker may
    // have two sections of a key at once (a schedule's attempt whose lease lapsed winding down, not acting, while the
    // attempt that took it over runs in the same process).
    this.open = new Map()
    this.errors = {}
    this.kills = []
    this.stale = { released: 0, refused: 0 }
    /** The kills whose sections end once the killed worker's last messages are in. */
    this.ending = []
    /** Schedules' attempts, by `name/fence`: { worker, name, tick, manual, attempt, why, fence, end: 'ok' | 'cut' | 'killed' | undefined }. */
    this.attempts = new Map()
    this.nextId = 1
    /** Locks handed over from one worker to another (handoff mode). */
    this.handoffs = 0
    /** The values shared() callers got (shared mode): `{ key, got, fence }`. */
    this.values = []
    /** How the workers' decrements ended (stock mode), by name. */
    this.outcomes = {}
  }

  /** Starts a worker with `config` (see worker.js) and `env` added to the environment. */
  spawn(config, env = {}) {
    const id = this.nextId++
    const child = fork(path.join(__dirname, 'worker.js'), [JSON.stringify(config)], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    })
    const entry = { id, child, config, env, paused: false, stopped: false }
    this.children.set(id, entry)
    child.on('message', (m) => this.#heard(id, m))
    child.on('exit', () => this.children.delete(id))
    return entry
  }

  #heard(worker, m) {
    if (m.type === 'enter') {
      const { key, shared, adopted } = m
      this.open.set(`${worker} ${key} ${m.fence}`, { worker, key, fence: BigInt(m.fence), enter: BigInt(m.t), shared, adopted })
    } else if (m.type === 'exit') {
      const s = this.open.get(`${worker} ${m.key} ${m.fence}`)
      this.open.delete(`${worker} ${m.key} ${m.fence}`)
      if (!s) return
      this.sections.push({ ...s, last: BigInt(m.last), cut: m.cut })
      const attempt = this.attempts.get(`${m.key}/${m.fence}`)
      if (attempt) attempt.end = m.cut ? 'cut' : 'ok'
    } else if (m.type === 'left') {
      this.open.delete(`${worker} ${m.key} ${m.fence}`)
    } else if (m.type === 'outcome') {
      this.outcomes[m.name] = (this.outcomes[m.name] ?? 0) + 1
    } else if (m.type === 'released') {
      // The release of the section a stopped worker held when it was stopped (entered before the stop, released
      // after it resumed) is stale. One called before the stop took effect (SIGSTOP is not instant, and its message
      // may still be on its way) is not, and then there was none.
      const entry = this.children.get(worker)
      if (entry?.stopped && BigInt(m.t) > entry.stoppedAt) {
        entry.stopped = false
        const stale = BigInt(m.enter) < entry.stoppedAt && entry.resumedAt !== null && BigInt(m.t) >= entry.resumedAt
        if (stale) this.stale[m.released ? 'released' : 'refused']++
      }
    } else if (m.type === 'error') {
      this.errors[m.code] = (this.errors[m.code] ?? 0) + 1
    } else if (m.type === 'value') {
      this.values.push({ key: m.key, got: m.got, fence: BigInt(m.fence) })
    } else if (m.type === 'handoff') {
      // To another worker that takes handed-over locks, at random (to none when there is none).
      const takers = [...this.children.values()].filter((c) => c.id !== worker && c.config.mode === 'handoff' && c.child.connected)
      const taker = takers[Math.floor(Math.random() * takers.length)]
      this.handoffs++
      taker?.child.send({ adopt: m.handle })
    } else if (m.type === 'attempt') {
      this.attempts.set(`${m.name}/${m.fence}`, { worker, ...m, end: undefined })
    }
  }

  /** A worker holding a key now (in a section that `which` picks), if any. */
  holder(which = () => true) {
    const holding = [...this.open.values()]
      .filter(which)
      .map((s) => s.worker)
      .filter((id) => this.children.has(id) && !this.children.get(id).paused)
    return holding.length ? this.children.get(holding[Math.floor(Math.random() * holding.length)]) : null
  }

  /**
   * SIGSTOPs `entry` for `ms`, then SIGCONTs it; with `stale`, the section it held when stopped is counted as the
   * stopped holder's (its release is stale) when it ends.
   */
  async pause(entry, ms, stale = true) {
    entry.paused = true
    entry.stopped = stale
    entry.stoppedAt = nowNs()
    entry.resumedAt = null
    entry.child.kill('SIGSTOP')
    await sleep(ms)
    entry.resumedAt = nowNs()
    entry.child.kill('SIGCONT')
    entry.paused = false
  }

  /**
   * For `ms`, every 1.5 s, a holder (a worker in a section, a leader) SIGKILLed and replaced, or SIGSTOPped for
   * 1.7 s (a lease of 1 s and then some), in turn; how many of each.
   */
  async killOrStopHolders(ms) {
    const end = Date.now() + ms
    let [kills, stops] = [0, 0]
    while (Date.now() < end) {
      const holder = this.holder()
      if (holder && kills <= stops) {
        this.kill(holder)
        kills++
      } else if (holder) {
        await this.pause(holder, 1700)
        stops++
      }
      await sleep(1500)
    }
    return { kills, stops }
  }

  /** SIGKILLs `entry` (its sections under way end at the kill) and starts another worker in its place. */
  kill(entry) {
    this.#killed(entry)
    this.spawn(entry.config, entry.env)
  }

  /** SIGTERMs `entry` (it shuts down as docs/locks.md says: see worker.js) and starts another worker in its place. */
  terminate(entry) {
    entry.child.kill('SIGTERM')
    this.children.delete(entry.id)
    this.spawn(entry.config, entry.env)
  }

  /** SIGKILLs every worker (their sections under way end at the kill). */
  killAll() {
    for (const entry of [...this.children.values()]) this.#killed(entry)
  }

  #killed(entry) {
    const t = nowNs()
    entry.child.kill('SIGKILL')
    this.children.delete(entry.id)
    // Its sections under way end at the kill, once the messages it sent before it are in (an exit on its way must
    // not be taken for a section that went on until the kill).
    const ended = () => {
      for (const [id, s] of this.open) {
        if (s.worker !== entry.id) continue
        this.open.delete(id)
        this.sections.push({ ...s, last: t, cut: false })
        this.kills.push({ key: s.key, t })
        const attempt = this.attempts.get(`${s.key}/${s.fence}`)
        if (attempt) attempt.end = 'killed'
      }
    }
    if (!entry.child.connected) return ended()
    this.ending.push(new Promise((resolve) => entry.child.once('disconnect', resolve)).then(ended))
  }

  /** Stops every worker (each finishes its section) and waits for them to exit, and for the killed ones' last words. */
  async stop() {
    const exits = [...this.children.values()].map(
      ({ child }) => new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve))),
    )
    for (const { child, paused } of this.children.values()) {
      if (paused) child.kill('SIGCONT')
      if (child.connected) child.send('stop')
    }
    const done = Promise.all(exits)
    const timer = setTimeout(() => this.children.forEach(({ child }) => child.kill('SIGKILL')), 15_000)
    await done
    clearTimeout(timer)
    await Promise.all(this.ending)
  }
}

/** The default worker config: `mode`, on `keys`, with `locker` options. */
function worker(mode, keys, locker, extra = {}) {
  return { mode, keys, locker, ttl: 1000, wait: 5000, acts: 3, pauseMs: 1, ...extra }
}

/** Resolves the ms from now until a section starts after `since` (ns), at most `limitMs`; null if none did. */
async function firstEnterAfter(workers, since, limitMs = 10_000) {
  const started = Date.now()
  while (Date.now() - started < limitMs) {
    const entered = [...workers.open.values(), ...workers.sections].filter((s) => s.enter > since)
    if (entered.length) return Number(entered.reduce((a, s) => (s.enter < a ? s.enter : a), entered[0].enter) - since) / 1e6
    await sleep(10)
  }
  return null
}

const keysOf = (name, n) => Array.from({ length: n }, (_, i) => `${name}:${i}`)

/**
 * Workers of `modes` (with `extra` config) on 2 keys named after `name`, then for 20 s a holder SIGKILLed or
 * SIGSTOPped for ttl + 0.7 s every 1.5 s, in turn.
 */
async function holdersKilledOrStopped({ url, workers, seconds }, name, modes, extra = {}) {
  const keys = keysOf(name, 2)
  for (const mode of modes) workers.spawn(worker(mode, keys, { url, prefix: 'chaos:' }, { acts: 3, pauseMs: 2, ...extra }))
  await sleep(1500)
  const { kills, stops } = await workers.killOrStopHolders(seconds(20) * 1000)
  return { notes: `${kills} holders killed, ${stops} stopped` }
}

/** 4 workers of `mode` (shared or idempotency: 4 acts, 10 ms pauses) under holdersKilledOrStopped, then auditValues. */
async function valuesUnderFaults(context, mode) {
  const { notes } = await holdersKilledOrStopped(context, mode, Array(4).fill(mode), { acts: 4, pauseMs: 10 })
  const audit = auditValues(context.workers)
  return { ...audit, notes: `${notes}; ${audit.notes}` }
}

/** The values callers got (shared and idempotency modes), each of its key and of a run that happened on it. */
function auditValues({ values, sections }) {
  const ran = new Set(sections.map((s) => `${s.key} ${s.fence}`))
  const wrong = values.filter((v) => v.got !== v.key || !ran.has(`${v.key} ${v.fence}`))
  const reused = values.length - new Set(values.map((v) => `${v.key} ${v.fence}`)).size
  return {
    scheduleFailures: wrong.length ? [`${wrong.length} values of another key or of no run`] : [],
    notes: `${values.length} values got, ${reused} of them without a run of their own, ${wrong.length} wrong`,
  }
}

/** The scenarios: each runs its workers and faults and returns what the table reports beyond the checks. */
const SCENARIOS = {
  steady: {
    title: 'no fault: 6 workers (lock, withLock, snatchTask) on 12 keys',
    async run({ url, workers, seconds }) {
      const keys = keysOf('steady', 12)
      for (const mode of ['lock', 'lock', 'withLock', 'withLock', 'snatchTask', 'snatchTask']) {
        workers.spawn(worker(mode, keys, { url, prefix: 'chaos:' }, { acts: 2, pauseMs: 0.5 }))
      }
      await sleep(seconds(55) * 1000)
      return {}
    },
  },
  'kill-holder': {
    title: 'SIGKILL of a holder every 0.8 s (ttl 1 s), a new worker in its place',
    async run({ url, workers, seconds }) {
      const keys = keysOf('kill', 2)
      for (const mode of ['lock', 'withLock', 'lock', 'withLock']) workers.spawn(worker(mode, keys, { url, prefix: 'chaos:' }))
      await sleep(1500)
      const end = Date.now() + seconds(12) * 1000
      while (Date.now() < end) {
        const holder = workers.holder()
        if (holder) workers.kill(holder)
        await sleep(800)
      }
      return {}
    },
  },
  'stop-holder': {
    title: 'SIGSTOP of a holder for ttl + 0.7 s (ttl 1 s), then SIGCONT: its signal aborts before it acts, its stale release answers false',
    async run({ url, workers, seconds }) {
      const keys = ['stop:0']
      for (let i = 0; i < 3; i++) workers.spawn(worker('lock', keys, { url, prefix: 'chaos:' }, { acts: 20, pauseMs: 10 }))
      await sleep(1500)
      const end = Date.now() + seconds(12) * 1000
      let stops = 0
      while (Date.now() < end) {
        const holder = workers.holder()
        if (holder) {
          await workers.pause(holder, 1700)
          stops++
          await sleep(1000)
        }
        await sleep(300)
      }
      return { notes: `${stops} holders stopped; stale releases answered false ${workers.stale.refused} times, true ${workers.stale.released} times` }
    },
  },
  leaders: {
    title:
      'leader election: 6 workers campaigning (lead, ttl 1 s, retry 0.2 s), the leader SIGKILLed (and replaced) or ' +
      'SIGSTOPped for ttl + 0.7 s in turn every 1.5 s: one leader acting at a time, terms rising',
    async run({ url, workers, seconds }) {
      for (let i = 0; i < 6; i++) {
        workers.spawn(worker('lead', ['chaos-leader'], { url, prefix: 'chaos:' }, { acts: 100, pauseMs: 10, retry: 200 }))
      }
      await sleep(1500)
      const { kills, stops } = await workers.killOrStopHolders(seconds(20) * 1000)
      return { notes: `${kills} leaders killed, ${stops} stopped` }
    },
  },
  'read-write': {
    title:
      'read-write locks: 4 readers and 2 writers on 2 keys (ttl 1 s), a holder SIGKILLed or SIGSTOPped for ttl + 0.7 s ' +
      'every 1.5 s, in turn (readers may overlap each other, a writer no one)',
    run: (context) => holdersKilledOrStopped(context, 'rw', ['read', 'read', 'read', 'read', 'write', 'write']),
  },
  fair: {
    title:
      'fair waiting: 6 workers (lock, withLock; fair: true) on 2 keys (ttl 1 s), a holder SIGKILLed or SIGSTOPped for ' +
      'ttl + 0.7 s every 1.5 s, in turn (a dead or stopped waiter keeps its place in the queue until it lapses, 2 s)',
    run: (context) =>
      holdersKilledOrStopped(context, 'fair', ['lock', 'lock', 'lock', 'withLock', 'withLock', 'withLock'], { fair: true }),
  },
  'stand-still': {
    title:
      'a process standing still between its acquisition and the call of fn: 3 withLock workers on one key (ttl 300 ms, ' +
      'not renewed), each blocking its event loop for 700 ms right after each call, while the native threads acquire: ' +
      'fn must not run under a lease that lapsed meanwhile',
    async run({ url, workers, seconds }) {
      for (let i = 0; i < 3; i++) {
        const options = { ttl: 300, autoExtend: false, acts: 3, pauseMs: 20, standStillMs: 700 }
        workers.spawn(worker('withLock', ['still:0'], { url, prefix: 'chaos:' }, options))
      }
      await sleep(seconds(10) * 1000)
      return {}
    },
  },
  'fence-expiry': {
    title:
      'fence counters expiring all through the run: 6 workers on 150 keys under 50 prefixes (a prefix\'s counter ' +
      'serves 3 keys), half keeping counters 100 ms (fenceTtl) and half 1 s, idle up to 60 ms between sections, one ' +
      'SIGKILLed and replaced every 1.5 s (each counter a short worker lets expire is started again from the server ' +
      'clock by whichever worker comes next)',
    async run({ url, workers, seconds }) {
      const keys = keysOf('expiry', 150)
      const expired = async () => Number(/expired_keys:(\d+)/.exec(await redisCommand(url, 'INFO', 'stats'))[1])
      const before = await expired()
      for (const [i, mode] of ['snatchTask', 'snatchTask', 'withLock', 'withLock', 'lock', 'lock'].entries()) {
        const locker = { url, prefix: 'chaos:', fenceTtl: i % 2 ? 1000 : 100 }
        workers.spawn(worker(mode, keys, locker, { acts: 2, pauseMs: 0.5, idleMs: 60, prefixes: 50 }))
      }
      const end = Date.now() + seconds(20) * 1000
      let replaced = 0
      while (Date.now() < end) {
        await sleep(1500)
        const running = [...workers.children.values()].filter((entry) => !entry.paused)
        if (running.length) {
          workers.kill(running[Math.floor(Math.random() * running.length)])
          replaced++
        }
      }
      return { notes: `${(await expired()) - before} keys expired in Redis (fence counters and leases); ${replaced} workers replaced` }
    },
  },
  'redis-restart': {
    title: 'Redis killed and restarted empty (no persistence) after ttl + 0.3 s',
    async run({ redis, url, workers, seconds }) {
      const keys = keysOf('restart', 4)
      for (const mode of ['lock', 'withLock', 'snatchTask', 'withLock']) workers.spawn(worker(mode, keys, { url, prefix: 'chaos:' }))
      await sleep(seconds(4) * 1000)
      await redis.kill()
      await sleep(1300)
      await redis.restart()
      const back = nowNs()
      const recovered = await firstEnterAfter(workers, back)
      await sleep(seconds(4) * 1000)
      return { recovery: recovered }
    },
  },
  'redis-pause': {
    title: 'Redis paused (SIGSTOP) for ttl + 0.5 s, then resumed',
    async run({ redis, url, workers, seconds }) {
      const keys = keysOf('pause', 4)
      for (const mode of ['lock', 'withLock', 'snatchTask', 'withLock']) workers.spawn(worker(mode, keys, { url, prefix: 'chaos:' }))
      await sleep(seconds(4) * 1000)
      redis.pause()
      await sleep(1500)
      redis.resume()
      const back = nowNs()
      const recovered = await firstEnterAfter(workers, back)
      await sleep(seconds(4) * 1000)
      return { recovery: recovered }
    },
  },
  'slow-link': {
    title: 'a slow link: 30 ms each way on every chunk, through a TCP proxy',
    async run({ redis, workers, seconds, proxies }) {
      const proxy = await startProxy(redis.port, { latency: 30 })
      proxies.push(proxy)
      const keys = keysOf('slow', 4)
      for (const mode of ['lock', 'withLock', 'snatchTask', 'withLock']) {
        workers.spawn(worker(mode, keys, { url: proxy.url, prefix: 'chaos:' }))
      }
      await sleep(seconds(10) * 1000)
      return {}
    },
  },
  'dropping-link': {
    title: 'a dropping link: one connection reset every 0.3 s, through a TCP proxy',
    async run({ redis, workers, seconds, proxies }) {
      const proxy = await startProxy(redis.port)
      proxies.push(proxy)
      const keys = keysOf('drop', 4)
      for (const mode of ['lock', 'withLock', 'snatchTask', 'withLock']) {
        workers.spawn(worker(mode, keys, { url: proxy.url, prefix: 'chaos:' }))
      }
      let resets = 0
      const end = Date.now() + seconds(10) * 1000
      while (Date.now() < end) {
        if (proxy.resetOne()) resets++
        await sleep(300)
      }
      return { notes: `${resets} connections reset` }
    },
  },
  'redlock-one-down': {
    title: 'Redlock over 3 nodes: one killed, restarted empty after ttl + 0.3 s',
    nodes: 3,
    async run({ nodes, workers, seconds }) {
      const keys = keysOf('rl1', 3)
      const urls = nodes.map((n) => n.url)
      for (const mode of ['lock', 'withLock', 'snatchTask']) workers.spawn(worker(mode, keys, { urls, prefix: 'chaos:' }))
      await sleep(seconds(3) * 1000)
      await nodes[0].kill()
      await sleep(seconds(3) * 1000)
      await nodes[0].restart()
      await sleep(seconds(4) * 1000)
      return {}
    },
  },
  'redlock-two-down': {
    title: 'Redlock over 3 nodes: two killed (no majority: QuorumError, nobody holds), restarted empty after ttl + 0.3 s',
    nodes: 3,
    async run({ nodes, workers, seconds }) {
      const keys = keysOf('rl2', 3)
      const urls = nodes.map((n) => n.url)
      for (const mode of ['lock', 'withLock', 'snatchTask']) workers.spawn(worker(mode, keys, { urls, prefix: 'chaos:' }))
      await sleep(seconds(3) * 1000)
      await Promise.all([nodes[0].kill(), nodes[1].kill()])
      const down = nowNs()
      await sleep(1300 + 1000) // past every lease, then a second of outage
      // Sections under way when the nodes went down end within a lease; none may start during the outage.
      const during = workers.sections.filter((s) => s.enter > down + 1_300_000_000n).length +
        [...workers.open.values()].filter((s) => s.enter > down + 1_300_000_000n).length
      await Promise.all([nodes[0].restart(), nodes[1].restart()])
      const back = nowNs()
      const recovered = await firstEnterAfter(workers, back)
      await sleep(seconds(3) * 1000)
      return { recovery: recovered, notes: `${during} sections started while two nodes were down` }
    },
  },
  schedules: {
    title: 'schedules on 3 processes with clocks 0, −300 and +300 ms off, through a Redis restart (down 1.3 s)',
    async run({ redis, url, workers, seconds }) {
      for (const offset of [0, -300, 300]) {
        workers.spawn(scheduler({ url, prefix: 'chaos:' }), { SNATCH_TEST_CLOCK_OFFSET_MS: String(offset) })
      }
      await sleep(seconds(5) * 1000)
      await redis.kill()
      await sleep(1300)
      await redis.restart()
      await sleep(seconds(5) * 1000)
      return occurrencesRun(workers)
    },
  },
  nest: {
    title:
      'a NestJS application (redis-snatch/nest) on 4 processes: @WithLock and @Snatch methods on 2 keys and a @Cron ' +
      'every second (ttl 1 s), a holder SIGKILLed or SIGSTOPped for ttl + 0.7 s every 1.5 s, in turn',
    async run(context) {
      const { notes } = await holdersKilledOrStopped(context, 'nest', ['nest', 'nest', 'nest', 'nest'])
      const occurrences = occurrencesRun(context.workers)
      return { ...occurrences, notes: `${notes}; ${occurrences.notes}` }
    },
  },
  drain: {
    title:
      'shutdown: workers (lock, withLock, snatchTask; ttl 1 s) on 2 keys and schedules on 3 processes, one SIGTERMed ' +
      'every 0.7 s as the guide says (close with a timeout of 0, 100 or 400 ms, then exit) and a new one in its ' +
      'place: sections under way finish or are cut, an interrupted attempt runs again at once elsewhere; then the ' +
      'records audited against what ran',
    async run({ url, workers, seconds }) {
      const { createLocker } = require('..')
      const operator = createLocker({ url, prefix: 'chaos:' })
      const keys = keysOf('drain', 2)
      const drains = [0, 100, 400]
      for (const [i, mode] of ['lock', 'withLock', 'snatchTask', 'withLock'].entries()) {
        workers.spawn(worker(mode, keys, { url, prefix: 'chaos:' }, { acts: 3, pauseMs: 20, drainMs: drains[i % 3] }))
      }
      for (const drainMs of drains) workers.spawn({ ...scheduler({ url, prefix: 'chaos:' }), drainMs })
      const started = await schedulesRegistered(operator)
      await sleep(2000)
      let terminated = 0
      const end = Date.now() + seconds(25) * 1000
      for (let round = 0; Date.now() < end; round++) {
        // In turn, a process running a scheduled attempt, and one in a section on a key.
        const target = round % 2 ? workers.holder() : await runnerWithin(workers, 1000, (s) => s.key.startsWith('chaos-'))
        if (target) {
          workers.terminate(target)
          terminated++
        }
        await sleep(700)
      }
      const audited = Date.now() - 5000
      await sleep(seconds(3) * 1000 + 4000)
      const audit = await auditSchedules(operator, workers, started + 1000, audited)
      await operator.close()
      return { scheduleFailures: audit.failures, notes: `${terminated} workers SIGTERMed; ${audit.summary}` }
    },
  },
  handoff: {
    title:
      'adopted locks: 4 workers on 2 keys (ttl 1 s) each hand their lock over halfway through its section to another, ' +
      'which adopts it and finishes the section (same fence); a holder SIGKILLed or SIGSTOPped for ttl + 0.7 s every ' +
      '1.5 s, in turn (handles then expire, or are adopted by a worker stopped meanwhile)',
    async run(context) {
      const { notes } = await holdersKilledOrStopped(context, 'handoff', ['handoff', 'handoff', 'handoff', 'handoff'], {
        acts: 4,
        pauseMs: 5,
      })
      const { handoffs, errors } = context.workers
      return { notes: `${notes}; ${handoffs} locks handed over, ${errors.ERR_SNATCH_LOCK_LOST ?? 0} handles refused` }
    },
  },
  'several-keys': {
    title:
      'several keys at once: 4 workers (lockAll + release, withLocks; ttl 1 s) each take 2 of 4 keys named in random ' +
      'order; a holder SIGKILLed or SIGSTOPped for ttl + 0.7 s every 1.5 s, in turn',
    async run({ url, workers, seconds }) {
      const keys = keysOf('several', 4)
      for (let i = 0; i < 4; i++) workers.spawn(worker('several', keys, { url, prefix: 'chaos:' }, { acts: 3, pauseMs: 2 }))
      await sleep(1500)
      const { kills, stops } = await workers.killOrStopHolders(seconds(20) * 1000)
      return { notes: `${kills} holders killed, ${stops} stopped` }
    },
  },
  reentrant: {
    title:
      'nested runs: 4 workers (withLock, ttl 1 s) on 2 keys, each section begun in the fn of a withLock and ended in ' +
      'a withLock of the same key nested in it with reentrant: true (same fence, the outer lease), awaited or, half ' +
      'the time, not (the lock kept until it ends); a holder SIGKILLed or SIGSTOPped for ttl + 0.7 s every 1.5 s, in ' +
      'turn. Then the control: the nested half a plain function acting until its first ttl ran out, not awaited, ' +
      'which other holders must be seen to overlap',
    async run(context) {
      const { notes } = await holdersKilledOrStopped(context, 'reentrant', Array(4).fill('reentrant'), { acts: 4, pauseMs: 5 })
      const { workers, url, seconds } = context
      await workers.stop()
      const mismatched = workers.errors.NESTED_FENCE ?? 0
      // The control, on keys of its own, audited apart and then taken out of the scenario's sections.
      const keys = keysOf('reentrant-control', 2)
      for (let i = 0; i < 4; i++) {
        workers.spawn(worker('reentrant', keys, { url, prefix: 'chaos:' }, { acts: 4, pauseMs: 20, control: true }))
      }
      await sleep(seconds(5) * 1000)
      await workers.stop()
      const ofControl = (s) => keys.includes(s.key)
      const audit = check(workers.sections.filter(ofControl))
      workers.sections = workers.sections.filter((s) => !ofControl(s))
      const failures = []
      if (mismatched > 0) failures.push(`${mismatched} nested runs saw another fence than their outer run's`)
      if (audit.overlaps === 0) failures.push('the control overlapped no holder: the audit was not shown able to fail')
      return {
        failures,
        notes: `${notes}; ${mismatched} nested runs with another fence; the control: ${audit.sections} sections, ${audit.overlaps} overlaps`,
      }
    },
  },
  idempotency: {
    title:
      'idempotency keys: 4 replicas (Express, redis-snatch/idempotency; ttl 1 s, responses kept 30 ms) each sending ' +
      'requests with 2 keys to its own app, the handler having the section; a holder SIGKILLed or SIGSTOPped for ttl + ' +
      '0.7 s every 1.5 s, in turn; every answer must be of its key and of a run that happened',
    run: (context) => valuesUnderFaults(context, 'idempotency'),
  },
  shared: {
    title:
      'shared results: 4 workers call shared() on 2 keys (ttl 1 s, resultTtl 20 ms), the runner has the section; a ' +
      'holder SIGKILLed or SIGSTOPped for ttl + 0.7 s every 1.5 s, in turn; every value a caller got must be of its key ' +
      'and of a run that happened',
    run: (context) => valuesUnderFaults(context, 'shared'),
  },
  'schedule-faults': {
    title:
      "schedules on 3 processes (clocks 0, −300, +300 ms off; ttl 1 s), every second and every 10 s: their runner " +
      'SIGKILLed, SIGSTOPped for 2.5 s, every process killed for 2.5 s across a tick of the 10-s one, manual runs ' +
      'asked for meanwhile; then the records audited against what ran',
    async run({ url, workers, seconds }) {
      const { createLocker } = require('..')
      const operator = createLocker({ url, prefix: 'chaos:' })
      const spawn = () =>
        [0, -300, 300].map((offset) =>
          workers.spawn(scheduler({ url, prefix: 'chaos:' }), { SNATCH_TEST_CLOCK_OFFSET_MS: String(offset) }),
        )
      spawn()
      const started = await schedulesRegistered(operator)
      await sleep(3000)
      const faults = { kills: 0, stops: 0, outages: 0, triggers: 0 }
      const end = Date.now() + seconds(30) * 1000
      for (let round = 0; Date.now() < end; round++) {
        if ((await operator.trigger('chaos-job').catch(() => null)) !== null) faults.triggers++
        const runner = await runnerWithin(workers, 2000)
        if (round % 4 === 3) {
          // Every process down from 1 s before a tick of the 10-s schedule to 1.5 s after it.
          await sleep(10_000 - ((Date.now() + 1000) % 10_000))
          workers.killAll()
          await sleep(2500)
          spawn()
          faults.outages++
        } else if (runner && round % 2 === 0) {
          workers.kill(runner)
          faults.kills++
        } else if (runner) {
          await workers.pause(runner, 2500, false)
          faults.stops++
        }
        await sleep(1500)
      }
      // Past the faults: taken over, retried, run late and recorded before the audit.
      const audited = Date.now() - 10_000
      await sleep(seconds(4) * 1000 + 8000)
      const audit = await auditSchedules(operator, workers, started + 1000, audited)
      await operator.close()
      return {
        scheduleFailures: audit.failures,
        notes:
          `${faults.kills} runners killed, ${faults.stops} stopped, ${faults.outages} outages of every process, ` +
          `${faults.triggers} manual runs asked for; ${audit.summary}`,
      }
    },
  },
  'stored-faults': {
    title:
      'stored schedules: 3 runner processes of one handler (ttl 1 s); an operator process upserts 24 schedules (every ' +
      '1 s or 2 s), changes and removes some while a runner is SIGKILLed or SIGSTOPped for 2.5 s in turn and Redis is ' +
      'restarted (appendonly, down 1.3 s); then every occurrence audited against the specs in force',
    persistent: true,
    async run({ redis, url, workers, seconds }) {
      const { createLocker } = require('..')
      const operator = createLocker({ url, prefix: 'chaos:' })
      const runner = () => workers.spawn({ mode: 'stored', locker: { url, prefix: 'chaos:' }, ttl: 1000, acts: 4, pauseMs: 60 })
      for (let n = 0; n < 3; n++) runner()
      /** Each schedule's specs in force: `{ id, every, startAt, from, to }` (to: when it was replaced or removed). */
      const specs = []
      const removed = new Map()
      const upsert = async (id, every) => {
        const from = Date.now()
        const startAt = Math.ceil((from + 1000) / every) * every
        await operator.upsertSchedule(id, { handler: 'chaos-stored', every, startAt, ttl: 1000, history: 1000, startingDeadline: 60_000 })
        for (const spec of specs) if (spec.id === id && spec.to === null) spec.to = from
        specs.push({ id, every, startAt, from, to: null })
      }
      const ids = Array.from({ length: 24 }, (_, n) => `chaos-stored-${n}`)
      for (const [n, id] of ids.entries()) await upsert(id, n % 2 ? 2000 : 1000)
      const faults = { kills: 0, stops: 0, restarts: 0, changes: 0, removals: 0 }
      const end = Date.now() + seconds(30) * 1000
      for (let round = 0; Date.now() < end; round++) {
        const live = ids.filter((id) => !removed.has(id))
        const pick = live[Math.floor(Math.random() * live.length)]
        if (round % 3 === 2 && removed.size < 6) {
          await operator.removeSchedule(pick)
          removed.set(pick, Date.now())
          faults.removals++
        } else {
          const current = specs.findLast((s) => s.id === pick)
          await upsert(pick, current.every === 1000 ? 2000 : 1000)
          faults.changes++
        }
        const busy = await runnerWithin(workers, 1000)
        if (round === 5) {
          await redis.kill()
          await sleep(1300)
          await redis.restart()
          faults.restarts++
        } else if (busy && round % 2 === 0) {
          // Replaced by a new runner (kill() starts one): three runners all along.
          workers.kill(busy)
          faults.kills++
        } else if (busy) {
          await workers.pause(busy, 2500, false)
          faults.stops++
        }
        await sleep(1500)
      }
      const audited = Date.now() - 3000
      // Past the faults: taken over, run late and recorded before the audit.
      await sleep(seconds(4) * 1000 + 6000)
      const records = new Map()
      for (const id of ids.filter((id) => !removed.has(id))) records.set(id, await operator.history(id, { limit: 1000 }))
      const attempts = [...workers.attempts.values()].filter((a) => a.name.startsWith('chaos-stored-'))
      const audit = auditStored(specs, removed, records, attempts, audited)
      // The audit shown able to fail: the same records with one ok record doubled (an occurrence run twice).
      const doctored = new Map([...records].map(([id, rs]) => [id, [...rs]]))
      const [someId, some] = [...doctored].find(([, rs]) => rs.some((r) => r.outcome === 'ok'))
      const ok = some.findIndex((r) => r.outcome === 'ok')
      doctored.set(someId, [...some.slice(0, ok), ...some.slice(ok + 1), { ...some[ok], attempt: some[ok].attempt + 1 }, some[ok]])
      // And one occurrence left without a record: of a schedule stored once and never changed, well inside its time.
      const kept = ids.filter((id) => id !== someId && !removed.has(id) && specs.filter((s) => s.id === id).length === 1)
      const dropped = kept.map((id) => [id, specs.find((s) => s.id === id)]).find(([id, spec]) =>
        doctored.get(id).some((r) => r.tick.getTime() >= spec.from + 2000 && r.tick.getTime() <= audited - 2000),
      )
      if (dropped) {
        const [id, spec] = dropped
        const list = doctored.get(id)
        const at = list.findIndex((r) => r.tick.getTime() >= spec.from + 2000 && r.tick.getTime() <= audited - 2000)
        doctored.set(id, list.filter((r) => r.tick.getTime() !== list[at].tick.getTime()))
      }
      const tampered = auditStored(specs, removed, doctored, attempts, audited)
      const failures = [...audit.failures]
      if (!tampered.failures.some((f) => f.includes('two ok records'))) failures.push('the audit did not fail on a doubled record')
      if (dropped && !tampered.failures.some((f) => f.includes('has no record'))) failures.push('the audit did not fail on a dropped record')
      await operator.close()
      return {
        scheduleFailures: failures,
        notes:
          `${faults.kills} runners killed, ${faults.stops} stopped, Redis restarted ${faults.restarts} time(s); ` +
          `${faults.changes} changes and ${faults.removals} removals; ${audit.summary}; on doctored records the audit ` +
          `fails (${tampered.failures.length}: ${tampered.failures.slice(0, 2).join('; ')})`,
      }
    },
  },
  'schedule-buffer': {
    title:
      "schedules with concurrency 'buffer' on 3 processes (clocks 0, −300, +300 ms off; ttl 4 s), attempts of about " +
      '1.2 s (up to 2.4) every second and every 10 s: their runner SIGKILLed or SIGSTOPped for ttl + 0.7 s in turn; ' +
      'the records audited against what ran, and no two occurrences waiting at once',
    async run({ url, workers, seconds }) {
      const { createLocker } = require('..')
      const operator = createLocker({ url, prefix: 'chaos:' })
      const config = { ...scheduler({ url, prefix: 'chaos:' }), ttl: 4000, acts: 8, pauseMs: 300 }
      config.schedule = { ...config.schedule, concurrency: 'buffer' }
      for (const offset of [0, -300, 300]) workers.spawn(config, { SNATCH_TEST_CLOCK_OFFSET_MS: String(offset) })
      const started = await schedulesRegistered(operator)
      await sleep(3000)
      const faults = { kills: 0, stops: 0 }
      const end = Date.now() + seconds(20) * 1000
      for (let round = 0; Date.now() < end; round++) {
        const runner = await runnerWithin(workers, 2000)
        if (runner && round % 2 === 0) {
          workers.kill(runner)
          workers.spawn(config, { SNATCH_TEST_CLOCK_OFFSET_MS: '0' })
          faults.kills++
        } else if (runner) {
          await workers.pause(runner, 4700, false)
          faults.stops++
        }
        await sleep(2000)
      }
      const audited = Date.now() - 10_000
      await sleep(seconds(4) * 1000 + 8000)
      const audit = await auditSchedules(operator, workers, started + 1000, audited)
      // The records' `started` are on the clock of the replica that ran (up to 300 ms off).
      const buffered = await auditBuffer(operator, 'chaos-job', started + 1000, audited, 300)
      await operator.close()
      return {
        scheduleFailures: [...audit.failures, ...buffered.failures],
        notes: `${faults.kills} runners killed, ${faults.stops} stopped; ${audit.summary}; ${buffered.summary}`,
      }
    },
  },
  'fenced-postgres': stockScenario('postgres', 'Postgres'),
  'fenced-mariadb': stockScenario('mysql', 'MariaDB'),
}

/** How many scheduled occurrences the workers completed, and a failure for those completed more than once. */
function occurrencesRun(workers) {
  const counts = new Map()
  for (const { name, tick, end } of workers.attempts.values()) {
    if (end === 'ok') counts.set(`${name}/${tick}`, (counts.get(`${name}/${tick}`) ?? 0) + 1)
  }
  const twice = [...counts.values()].filter((n) => n > 1).length
  const scheduleFailures = twice ? [`${twice} occurrences ran more than once`] : []
  return { scheduleFailures, notes: `${counts.size} occurrences ran, ${twice} of them more than once` }
}

/** A worker config for a schedule (worker.js `schedule` mode) on `locker`. */
function scheduler(locker) {
  return { mode: 'schedule', locker, ttl: 1000, acts: 4, pauseMs: 60, schedule: { history: 2000, startingDeadline: 60_000 } }
}

/** A worker in a section (that `which` picks) within `ms` (the first seen), or null. */
async function runnerWithin(workers, ms, which) {
  const until = Date.now() + ms
  while (Date.now() < until) {
    const holder = workers.holder(which)
    if (holder) return holder
    await sleep(10)
  }
  return null
}

/**
 * When both of the scheduler workers' schedules are registered (a state read in a loop, up to 30 s): the audit
 * starts after it, since an occurrence before a schedule's first registration is nobody's to record (a slow start
 * under load would otherwise show as occurrences without a record).
 */
async function schedulesRegistered(operator) {
  const names = ['chaos-job', 'chaos-sparse']
  for (const deadline = Date.now() + 30_000; Date.now() < deadline; await sleep(50)) {
    const registered = (await operator.schedules().catch(() => [])).filter((s) => names.includes(s.name) && s.replicas.length > 0)
    if (registered.length === names.length) return Date.now()
  }
  throw new Error('the scheduler workers did not register their schedules within 30 s')
}

/** auditSchedule of the scheduler workers' two schedules, chaos-job (every second) and chaos-sparse (every 10 s). */
async function auditSchedules(operator, workers, from, to) {
  const audits = [
    await auditSchedule(operator, workers, 'chaos-job', 1000, from, to),
    await auditSchedule(operator, workers, 'chaos-sparse', 10_000, from, to),
  ]
  return { failures: audits.flatMap((a) => a.failures), summary: audits.map((a) => a.summary).join('; ') }
}

/**
 * Checks schedule `name`'s records (`concurrency: 'buffer'`) for the occurrences from `from` to `to`: of the on-time or
 * late occurrences due while an attempt ran holding its lease, at most one ran (it waited; never two), and some
 * occurrences waited for a running one (the buffer was used); then the same check on the records with two more
 * occurrences run in the time of one run, which it must fail.
 */
async function auditBuffer(operator, name, from, to, skew) {
  const records = (await operator.history(name, { limit: 2000 })).filter((r) => !r.manual && r.started && typeof r.durationMs === 'number')
  const audit = bufferChecked(records, name, from, to, skew)
  const failures = [...audit.failures]
  // The control: two occurrences made to run in the time of one run that kept its lease.
  const inWindow = (r) => r.tick.getTime() >= from && r.started.getTime() + r.durationMs <= to
  const run = records.find((r) => r.outcome === 'ok' && inWindow(r) && r.durationMs > 2 * skew + 100)
  let control = ''
  if (run) {
    const at = (share) => new Date(run.started.getTime() + skew + (run.durationMs - 2 * skew) * share)
    const extra = [1 / 3, 2 / 3].map((share) => ({ ...run, attempt: 1, why: 'on-time', tick: at(share) }))
    const doctored = bufferChecked([...records, ...extra], name, from, to, skew)
    if (doctored.twice === 0) failures.push('the buffer audit did not fail on doctored records')
    control = `; on doctored records it fails (${doctored.failures[0]})`
  } else {
    failures.push(`no run of ${name} kept its lease`)
  }
  return {
    failures,
    summary: `${name}: ${audit.waited} occurrences waited for a running one and ran after it, never two at once${control}${failures.length ? `; AUDIT FAILED: ${failures.slice(0, 3).join('; ')}` : ''}`,
  }
}

/**
 * auditBuffer's check of `records` (those that ran): `twice`, the runs that two occurrences or more waited for, counts
 * only runs that kept their lease (not `lost`): one whose process was stopped past its lease lost the run lock
 * meanwhile, so the occurrence waiting for it ran, and the next one could wait for that one, both within the lost
 * run's recorded time, as the rules have it. A run's time is taken `skew` ms shorter at each end there: its `started`
 * is on its replica's clock, and an occurrence due just after it really ended waits for the one that waited for it,
 * not for it. `waited` counts the occurrences due while any run ran (its time as recorded), from `from` to the
 * newest record, past the faults too.
 */
function bufferChecked(records, name, from, to, skew) {
  const since = records.filter((r) => r.tick.getTime() >= from)
  const first = since.filter((r) => r.attempt === 1 && (r.why === 'on-time' || r.why === 'late'))
  let waited = 0
  let twice = 0
  const failures = []
  for (const r of since) {
    const begin = r.started.getTime()
    const within = (margin) => first.filter((o) => o.tick.getTime() > begin + margin && o.tick.getTime() < begin + r.durationMs - margin)
    const due = within(skew)
    if (due.length > 1 && r.outcome !== 'lost' && r.tick.getTime() <= to) {
      twice++
      const at = (o) => `${o.tick.getTime() - begin} ms: ${o.outcome} by ${o.instance} from ${o.started.getTime() - begin} ms`
      failures.push(
        `${due.length} occurrences of ${name} ran after waiting for the one of ${r.tick.toISOString()} ` +
          `(${r.outcome} by ${r.instance}, ${Math.round(r.durationMs)} ms; due at ${due.map(at).join(', ')})`,
      )
    }
    waited += within(0).length
  }
  if (waited === 0) failures.push(`no occurrence of ${name} waited for a running one`)
  return { failures, waited, twice }
}

/**
 * Checks schedule `name`'s records (its ticks `period` ms apart) against the attempts the workers reported, for the
 * occurrences from `from` to `to` (epoch ms): each attempt that completed has its record, 'ok', with its fence, and
 * each 'ok' record an attempt that completed; every occurrence has a record (ran, or missed for a reason); none has
 * two that completed.
 */
async function auditSchedule(operator, workers, name, period, from, to) {
  const records = await operator.history(name, { limit: 2000 })
  const inWindow = (tick) => tick >= from && tick <= to
  const attempts = [...workers.attempts.values()].filter((a) => a.name === name && inWindow(a.tick))
  const failures = []
  const key = (tick, manual, attempt) => `${name} ${tick}${manual ? 'm' : ''}/${attempt}`
  const recorded = new Map(records.map((r) => [key(r.tick.getTime(), r.manual, r.attempt), r]))
  for (const a of attempts.filter((a) => a.end === 'ok')) {
    const r = recorded.get(key(a.tick, a.manual, a.attempt))
    if (r?.outcome !== 'ok' || String(r.fence) !== a.fence) {
      failures.push(`attempt ${key(a.tick, a.manual, a.attempt)} completed; its record: ${r?.outcome}`)
    }
  }
  const completed = new Set(attempts.filter((a) => a.end === 'ok').map((a) => key(a.tick, a.manual, a.attempt)))
  const windowed = records.filter((r) => inWindow(r.tick.getTime()))
  for (const r of windowed.filter((r) => r.outcome === 'ok')) {
    const k = key(r.tick.getTime(), r.manual, r.attempt)
    if (!completed.has(k)) failures.push(`record ${k} says ok; no attempt completed`)
  }
  const byTick = new Map()
  for (const r of records.filter((r) => !r.manual)) byTick.set(r.tick.getTime(), [...(byTick.get(r.tick.getTime()) ?? []), r])
  let lost = 0
  for (let tick = Math.ceil(from / period) * period; tick <= to; tick += period) if (!byTick.has(tick)) lost++
  if (lost) failures.push(`${lost} occurrences of ${name} have no record`)
  const twice = [...byTick.values()].filter((rs) => rs.filter((r) => r.outcome === 'ok').length > 1).length
  if (twice) failures.push(`${twice} occurrences of ${name} completed twice`)
  const count = (f) => windowed.filter(f).length
  const reasons = ['superseded', 'deadline', 'overlap'].map((reason) => `${count((r) => r.reason === reason)} ${reason}`)
  const outcomes = ['failed', 'lost', 'crashed', 'interrupted', 'running'].map((o) => `${count((r) => r.outcome === o)} ${o}`)
  const ran = (why) => count((r) => r.why === why && r.outcome === 'ok')
  return {
    failures,
    summary:
      `${name}: ${count((r) => r.outcome === 'ok')} attempts ran (${ran('late')} late, ${ran('retry')} taken over from a dead, stopped or ` +
      `shut-down runner, ${ran('manual')} manual), missed ${reasons.join(', ')}, attempts ${outcomes.join(', ')}; ` +
      `${failures.length ? `AUDIT FAILED: ${failures.slice(0, 5).join('; ')}` : 'the records match what ran'}`,
  }
}

/**
 * Audits stored schedules against the specs in force (`specs`: `{ id, every, startAt, from, to }`; `removed`: id → when
 * removed): every tick of a spec, from a second after it was stored to a second before it was replaced (and up to `to`,
 * epoch ms), has a record of its schedule (`records`: id → its history), ok or missed; no tick has two ok records; each
 * attempt the runners completed has its ok record with its fence and each ok record such an attempt; no attempt of a
 * removed schedule started after its removal; no tick of a schedule completed twice.
 */
function auditStored(specs, removed, records, attempts, to) {
  const failures = []
  let expected = 0
  const key = (id, tick, attempt) => `${id} ${tick}/${attempt}`
  for (const spec of specs) {
    const list = records.get(spec.id)
    if (list === undefined) continue
    const ticks = new Set(list.filter((r) => !r.manual).map((r) => r.tick.getTime()))
    const last = Math.min(spec.to === null ? to : spec.to - 1000, to)
    for (let tick = spec.startAt; tick <= last; tick += spec.every) {
      if (tick < spec.from + 1000) continue
      expected++
      if (!ticks.has(tick)) {
        const near = list.filter((r) => Math.abs(r.tick.getTime() - tick) <= 2000).map((r) => `${r.tick.getTime() - tick}:${r.outcome}/${r.why}`)
        failures.push(`${spec.id} ${tick} (every ${spec.every}, stored ${spec.from - tick} ms from it) has no record (near: ${near.join(' ') || 'none'})`)
      }
    }
  }
  for (const [id, list] of records) {
    const byTick = new Map()
    for (const r of list.filter((r) => r.outcome === 'ok')) byTick.set(r.tick.getTime(), (byTick.get(r.tick.getTime()) ?? 0) + 1)
    const twice = [...byTick.values()].filter((n) => n > 1).length
    if (twice) failures.push(`${twice} occurrences of ${id} have two ok records`)
    const completed = new Map(attempts.filter((a) => a.name === id && a.end === 'ok').map((a) => [key(id, a.tick, a.attempt), a]))
    for (const r of list.filter((r) => r.outcome === 'ok' && r.tick.getTime() <= to)) {
      const a = completed.get(key(id, r.tick.getTime(), r.attempt))
      if (a === undefined || a.fence !== String(r.fence)) failures.push(`record ${key(id, r.tick.getTime(), r.attempt)} says ok; no attempt completed with its fence`)
    }
    const recorded = new Set(list.filter((r) => r.outcome === 'ok').map((r) => key(id, r.tick.getTime(), r.attempt)))
    for (const k of completed.keys()) if (Number(k.split(' ')[1].split('/')[0]) <= to && !recorded.has(k)) failures.push(`attempt ${k} completed; no ok record`)
  }
  const ran = new Map()
  for (const a of attempts.filter((a) => a.end === 'ok')) ran.set(`${a.name} ${a.tick}`, (ran.get(`${a.name} ${a.tick}`) ?? 0) + 1)
  const twice = [...ran.values()].filter((n) => n > 1).length
  if (twice) failures.push(`${twice} occurrences completed twice`)
  const afterRemoval = attempts.filter((a) => removed.has(a.name) && a.at > removed.get(a.name)).length
  if (afterRemoval) failures.push(`${afterRemoval} attempts started after their schedule was removed`)
  const all = [...records.values()].flat().filter((r) => r.tick.getTime() <= to)
  const count = (f) => all.filter(f).length
  return {
    failures,
    summary:
      `${expected} occurrences of the specs in force checked, ${count((r) => r.outcome === 'ok')} attempts ran ` +
      `(${count((r) => r.why === 'late' && r.outcome === 'ok')} late, ${count((r) => r.why === 'retry' && r.outcome === 'ok')} taken over), ` +
      `${count((r) => r.outcome === 'missed')} missed, ${count((r) => r.outcome === 'crashed')} crashed, ` +
      `${count((r) => r.outcome === 'interrupted')} interrupted; ` +
      `${failures.length ? `AUDIT FAILED: ${failures.slice(0, 5).join('; ')}` : 'the records match the specs and what ran'}`,
  }
}

/** Parses `--only a,b` and `--scale N`. */
function parseArgs(argv) {
  const options = { only: Object.keys(SCENARIOS), scale: 1 }
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--only') options.only = argv[++i].split(',')
    else if (argv[i] === '--scale') options.scale = Number(argv[++i])
    else {
      console.error(`usage: npm run chaos -- [--only ${Object.keys(SCENARIOS).join(',')}] [--scale N]`)
      process.exit(2)
    }
  }
  const unknown = options.only.filter((name) => !SCENARIOS[name])
  if (unknown.length || !(options.scale > 0)) {
    console.error(`unknown scenario ${unknown.join(', ')} or bad --scale`)
    process.exit(2)
  }
  return options
}

/** Runs scenario `name`: its servers, workers and faults, then the checks. */
async function runScenario(name, scale) {
  const scenario = SCENARIOS[name]
  // A scenario whose Redis keeps its data across a restart (stored schedules are data): appendonly in a directory of
  // its own, fsynced on every write.
  const dir = scenario.persistent ? fs.mkdtempSync(path.join(os.tmpdir(), 'snatch-chaos-')) : null
  const args = dir ? ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', dir] : []
  const nodes = await Promise.all(Array.from({ length: scenario.nodes ?? 1 }, () => startRedis({ args })))
  const workers = new Workers()
  const proxies = []
  console.error(`${name}: ${scenario.title}`)
  const started = Date.now()
  let extra
  try {
    extra = await scenario.run({
      redis: nodes[0],
      url: nodes[0].url,
      nodes,
      workers,
      proxies,
      seconds: (s) => s * scale,
    })
    await workers.stop()
  } finally {
    for (const child of workers.children.values()) child.child.kill('SIGKILL')
    await Promise.all(proxies.map((p) => p.close()))
    await Promise.all(nodes.map((n) => n.stop()))
    if (dir) fs.rmSync(dir, { recursive: true, force: true })
  }
  const checked = check(workers.sections)
  const delays = takeovers(workers.kills, workers.sections)
  return {
    name,
    title: scenario.title,
    seconds: (Date.now() - started) / 1000,
    ...checked,
    cut: workers.sections.filter((s) => s.cut).length,
    // Acting without a valid lease shows as an overlap with the next holder, or as a stale release that deleted it.
    unleased: checked.overlaps > 0 || workers.stale.released > 0,
    takeover: delays.length ? { n: delays.length, p50: percentile(delays, 50), p99: percentile(delays, 99) } : null,
    errors: workers.errors,
    ...extra,
  }
}

/** The report: a table of every scenario, then notes. */
function render(results, scale) {
  const ms = (v) => (v === null || v === undefined ? '—' : `${v.toFixed(0)} ms`)
  const total = results.reduce((n, r) => n + r.sections, 0)
  const lines = [
    `Run of ${new Date().toISOString().slice(0, 19)}Z on ${os.availableParallelism()} CPUs (${os.cpus()[0]?.model.trim()}), ` +
      `Node ${process.version}${scale !== 1 ? `, durations × ${scale}` : ''}: ${total.toLocaleString('en')} critical sections, ` +
      `${results.reduce((n, r) => n + r.overlaps, 0)} overlaps, ${results.reduce((n, r) => n + r.fenceViolations, 0)} fence violations ` +
      `(${results.reduce((n, r) => n + r.unacted, 0)} sections cut before their first act left out: see docs/SAFETY.md).`,
    '',
    '| scenario | sections | overlaps | fence violations | fn acted without a valid lease | cut by their lease | takeover after a kill p50 / p99 | back after the fault | calls failed, by code |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---|',
  ]
  for (const r of results) {
    const errors = Object.entries(r.errors).map(([code, n]) => `${code} ${n}`).join(', ') || '—'
    const takeover = r.takeover ? `${ms(r.takeover.p50)} / ${ms(r.takeover.p99)} (${r.takeover.n})` : '—'
    lines.push(
      `| ${r.name} | ${r.sections.toLocaleString('en')} | ${r.overlaps} | ${r.fenceViolations} | ${r.unleased ? 'yes' : 'no'} | ${r.cut} | ${takeover} | ` +
        `${ms(r.recovery)} | ${errors} |`,
    )
  }
  lines.push('')
  for (const r of results) {
    lines.push(`- **${r.name}**: ${r.title}.${r.notes ? ` ${r.notes}.` : ''}`)
    for (const e of r.examples) lines.push(`  - overlap on ${e.key}: ${e.first} / ${e.second}`)
  }
  return lines.join('\n')
}

/** The markers of docs/SAFETY.md's results of the critical sections, and of the fenced writes (stock scenarios). */
const SECTIONS = ['<!-- RESULTS BEGIN (npm run chaos writes this) -->', '<!-- RESULTS END -->']
const STOCK = ['<!-- FENCED RESULTS BEGIN (npm run chaos -- --only fenced-postgres,fenced-mariadb writes this) -->', '<!-- FENCED RESULTS END -->']

/** Writes `report` into docs/SAFETY.md between `markers`. */
function publish([begin, end], report) {
  const text = fs.readFileSync(SAFETY, 'utf8')
  const from = text.indexOf(begin)
  const to = text.indexOf(end)
  if (from < 0 || to < from) throw new Error(`${SAFETY} has no markers ${begin} … ${end}`)
  fs.writeFileSync(SAFETY, `${text.slice(0, from + begin.length)}\n${report}\n${text.slice(to)}`)
}

async function main() {
  const options = parseArgs(process.argv.slice(2))
  ensureBuilt()
  const results = []
  for (const name of options.only) results.push(await runScenario(name, options.scale))
  // Two reports: of the critical sections (checked in Redis' terms), and of the fenced writes (audited in a database);
  // each written to docs/SAFETY.md when every scenario of its kind ran.
  for (const [data, markers, report] of [[false, SECTIONS, render], [true, STOCK, renderStock]]) {
    const names = Object.keys(SCENARIOS).filter((name) => Boolean(SCENARIOS[name].data) === data)
    const ran = results.filter((r) => names.includes(r.name))
    if (ran.length === 0) continue
    const text = report(ran, options.scale)
    console.log(`${text}\n`)
    if (ran.length === names.length) {
      publish(markers, text)
      console.error(`written to ${path.relative(process.cwd(), SAFETY)}`)
    }
  }
  const failed = results.some(
    (r) => r.overlaps > 0 || r.fenceViolations > 0 || r.scheduleFailures?.length > 0 || r.dataFailures?.length > 0 || r.failures?.length > 0,
  )
  process.exitCode = failed ? 1 : 0
}

main().catch((err) => {
  console.error(err.stack || err.message)
  process.exitCode = 1
})
