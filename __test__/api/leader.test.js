'use strict'
// Leader election (locker.lead, locker.observe): in one process (hand-over on resign, terms rising, a lost lease, a
// failing fn, stop and close, memory:// and Redlock, bad arguments), and six replica processes campaigning while leaders are SIGKILLed,
// SIGSTOPped and resign: never two leaders acting at once (an overlap audit of their acts), a new leader within about
// ttl + retry of a kill, terms rising.

const { fork } = require('node:child_process')
const path = require('node:path')
const { createLocker } = require('../..')
const { startRedis } = require('../support/redis-server')
const { next, uniqueKey, until } = require('../support/util')

jest.setTimeout(60_000)

const TTL = 1000
const RETRY = 200

const lockers = []
/** A locker named `instanceId`, closed after the suite. */
function locker(instanceId) {
  const made = createLocker({ url: process.env.REDIS_URL, instanceId })
  lockers.push(made)
  return made
}
afterAll(() => Promise.all(lockers.map((l) => l.close())))

/** fn of a leader that leads until its signal aborts. */
const untilAborted = ({ signal }) => new Promise((resolve) => signal.addEventListener('abort', resolve))

/**
 * Records `observer`'s changes from now on; `heard(match)` resolves the first change, heard already or to come, for
 * which `match` holds (an observer hears of a new leader within milliseconds: it may be told before a test looks).
 */
function changes(observer) {
  const seen = []
  const waiting = []
  observer.on('change', (change) => {
    seen.push(change)
    for (const w of waiting.filter((w) => w.match(change))) {
      waiting.splice(waiting.indexOf(w), 1)
      w.resolve(change)
    }
  })
  const heard = (match) =>
    new Promise((resolve) => {
      const before = seen.find(match)
      if (before) resolve(before)
      else waiting.push({ match, resolve })
    })
  return { seen, heard }
}

describe('in one process', () => {
  test('one of two campaigns leads; resign hands over at once; terms rise; stop ends the campaign', async () => {
    const name = uniqueKey('lead')
    const a = locker('a').lead(name, untilAborted, { ttl: TTL, retry: RETRY })
    const first = await next(a, 'elected')
    expect(a.isLeader).toBe(true)
    expect(a.leader).toBe('a')
    const other = locker('b').lead(name, untilAborted, { ttl: TTL, retry: RETRY })
    await until(() => other.leader !== null, 'the second campaign to try') // and see who leads
    expect(other.leader).toBe('a')
    expect(other.isLeader).toBe(false)
    const elsewhere = next(other, 'elected')
    const revoked = next(a, 'revoked')
    await a.resign()
    expect(await revoked).toEqual({ term: first.term, reason: 'resigned' })
    const second = await elsewhere
    expect(second.term).toBeGreaterThan(first.term)
    expect(a.isLeader).toBe(false)
    const elected = next(a, 'elected') // a campaigns again after its pause
    await other.stop()
    expect(other.isLeader).toBe(false)
    const third = await elected
    expect(third.term).toBeGreaterThan(second.term)
    await a.stop()
  })

  test('observe() sees the leader change without campaigning', async () => {
    const name = uniqueKey('observe')
    const observer = locker('watcher').observe(name)
    const { seen, heard } = changes(observer)
    const leadership = locker('leader-1').lead(name, untilAborted, { ttl: TTL, retry: RETRY })
    const { term } = await next(leadership, 'elected')
    const change = await heard(({ leader }) => leader === 'leader-1')
    expect(change.term).toBe(term) // the leader's own fence
    expect(observer.leader).toBe('leader-1')
    await leadership.stop()
    await heard(({ leader }) => leader === null)
    observer.close()
    expect(seen).toEqual([{ leader: 'leader-1', term }, { leader: null, term: null }])
  })

  test('a lease taken away (forceRelease) aborts the signal, revokes with reason lost, and the campaign goes on', async () => {
    const name = uniqueKey('lead-lost')
    const l = locker('lost')
    const leadership = l.lead(name, untilAborted, { ttl: TTL, retry: RETRY })
    const { term } = await next(leadership, 'elected')
    const revoked = next(leadership, 'revoked')
    expect(await l.forceRelease(name)).toBe(true)
    expect(await revoked).toEqual({ term, reason: 'lost' })
    const again = await next(leadership, 'elected')
    expect(again.term).toBeGreaterThan(term)
    await leadership.stop()
  })

  test('fn that throws: an error event, revoked with reason error, and the campaign goes on', async () => {
    const name = uniqueKey('lead-throws')
    let calls = 0
    const leadership = locker('throws').lead(
      name,
      () => {
        calls++
        throw new Error(`boom ${calls}`)
      },
      { ttl: TTL, retry: RETRY },
    )
    const errors = []
    leadership.on('error', (err) => errors.push(err.message))
    const { reason } = await next(leadership, 'revoked')
    expect(reason).toBe('error')
    await next(leadership, 'revoked')
    await leadership.stop()
    expect(errors.slice(0, 2)).toEqual(['boom 1', 'boom 2'])
  })

  test('close() stops the campaigns and ends the term under way', async () => {
    const l = createLocker({ url: process.env.REDIS_URL })
    const leadership = l.lead(uniqueKey('lead-close'), untilAborted, { ttl: TTL, retry: RETRY })
    await next(leadership, 'elected')
    const revoked = next(leadership, 'revoked')
    await l.close()
    expect((await revoked).reason).toBe('stopped')
    expect(leadership.isLeader).toBe(false)
  })

  test.each([
    ['memory://', async () => [`memory://${uniqueKey('lead-memory')}`]],
    [
      'Redlock (three servers)',
      async () => {
        const servers = await Promise.all([startRedis(), startRedis(), startRedis()])
        return [servers.map((server) => server.url), () => Promise.all(servers.map((server) => server.stop()))]
      },
    ],
  ])('on %s: one of two lockers leads, resign hands over, an observer sees both', async (_name, deployment) => {
    const [where, stop] = await deployment()
    const made = (instanceId) => createLocker({ ...(Array.isArray(where) ? { urls: where } : { url: where }), instanceId })
    const [one, two] = [made('one'), made('two')]
    try {
      const name = uniqueKey('lead-where')
      const observer = one.observe(name)
      const { heard } = changes(observer)
      const first = one.lead(name, untilAborted, { ttl: TTL, retry: RETRY })
      const { term } = await next(first, 'elected')
      const second = two.lead(name, untilAborted, { ttl: TTL, retry: RETRY })
      expect((await heard(({ leader }) => leader === 'one')).term).toBe(term)
      const elsewhere = next(second, 'elected')
      await first.resign()
      const secondTerm = (await elsewhere).term
      expect(secondTerm).toBeGreaterThan(term)
      expect((await heard(({ leader }) => leader === 'two')).term).toBe(secondTerm)
      observer.close()
      await Promise.all([first.stop(), second.stop()])
    } finally {
      await Promise.all([one.close(), two.close()])
      await stop?.()
    }
  })

  test.each([
    ['a name that is not a string', (l) => l.lead(1, untilAborted), TypeError],
    ['no fn', (l) => l.lead('x'), TypeError],
    ['a ttl under 5 ms', (l) => l.lead('x', untilAborted, { ttl: 1 }), RangeError],
    ['a retry of 0', (l) => l.lead('x', untilAborted, { retry: 0 }), RangeError],
    ['a retry that is not a number', (l) => l.lead('x', untilAborted, { retry: '1' }), TypeError],
    ['observe without a name', (l) => l.observe(), TypeError],
  ])('%s throws ERR_SNATCH_INVALID_ARG', (_name, call, Class) => {
    const l = locker('args')
    let thrown
    try {
      call(l)
    } catch (err) {
      thrown = err
    }
    expect(thrown).toBeInstanceOf(Class)
    expect(thrown.code).toBe('ERR_SNATCH_INVALID_ARG')
  })
})

/** Replica processes campaigning (support/workers/leader-replica.js), and what they reported. */
class Replicas {
  children = new Map()
  events = []
  #waiters = []

  /** Starts a replica campaigning for `name`; resolves its pid once it campaigns. */
  async start(name) {
    const child = fork(path.join(__dirname, '..', 'support', 'workers', 'leader-replica.js'), { env: process.env })
    child.on('message', (event) => this.#heard(event))
    this.children.set(child.pid, child)
    child.send({ name, ttl: TTL, retry: RETRY, instanceId: `replica-${child.pid}` })
    await this.next((e) => e.event === 'ready' && e.pid === child.pid, 'a replica to start')
    return child.pid
  }

  /** Resolves the first event from now on (`past`: or already heard) for which `match` holds. */
  next(match, what, past = false) {
    const heard = past && this.events.find(match)
    if (heard) return Promise.resolve(heard)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), 30_000)
      this.#waiters.push({ match, resolve: (e) => (clearTimeout(timer), resolve(e)) })
    })
  }

  #heard(event) {
    this.events.push(event)
    this.#waiters = this.#waiters.filter((w) => !(w.match(event) && (w.resolve(event), true)))
  }

  /** Stops every replica (each stops campaigning and closes its locker) and waits for them to exit. */
  async stopAll() {
    await Promise.all(
      [...this.children.values()].map((child) => {
        const exited = new Promise((resolve) => child.once('exit', resolve))
        child.kill('SIGCONT')
        if (child.connected) child.send({ stop: true })
        else child.kill('SIGKILL')
        return exited
      }),
    )
  }

  /**
   * The terms as sections (`{ pid, term, enter, last }`: from the election to the last act, in ns) and the audit:
   * sections in the order they began must each begin after every earlier one's last act, with rising terms.
   */
  audit() {
    const sections = new Map()
    for (const e of this.events) {
      if (e.event !== 'elected' && e.event !== 'act') continue
      const id = `${e.pid}/${e.term}`
      const t = BigInt(e.t)
      if (e.event === 'elected') sections.set(id, { pid: e.pid, term: BigInt(e.term), enter: t, last: t })
      else if (sections.has(id)) sections.get(id).last = t
    }
    const list = [...sections.values()].sort((x, y) => (x.enter < y.enter ? -1 : 1))
    let reach = -1n
    const overlaps = []
    let fallingTerms = 0
    list.forEach((s, i) => {
      if (s.enter <= reach) overlaps.push(s)
      if (i > 0 && s.term <= list[i - 1].term) fallingTerms++
      if (s.last > reach) reach = s.last
    })
    return { terms: list.length, overlaps, fallingTerms }
  }
}

describe('six replica processes', () => {
  test('one leader at a time under SIGKILL, SIGSTOP and resign; a new leader within about ttl + retry', async () => {
    const name = uniqueKey('lead-fleet')
    const replicas = new Replicas()
    const observer = locker('fleet-watcher').observe(name)
    const observed = new Set()
    observer.on('change', ({ leader }) => leader && observed.add(leader))
    try {
      await Promise.all(Array.from({ length: 6 }, () => replicas.start(name)))
      let leader = await replicas.next((e) => e.event === 'elected', 'a first leader', true)

      // SIGKILL of the leader, twice: another replica leads within about ttl + retry.
      for (let round = 0; round < 2; round++) {
        await replicas.next((e) => e.event === 'act' && e.pid === leader.pid, 'the leader to act', true)
        const killedAt = process.hrtime.bigint()
        const elected = replicas.next((e) => e.event === 'elected' && e.pid !== leader.pid, 'a leader after a kill')
        replicas.children.get(leader.pid).kill('SIGKILL')
        replicas.children.delete(leader.pid)
        const successor = await elected
        expect(Number(BigInt(successor.t) - killedAt) / 1e6).toBeLessThan(TTL + RETRY + 1500)
        expect(BigInt(successor.term)).toBeGreaterThan(BigInt(leader.term))
        await replicas.start(name)
        leader = successor
      }

      // SIGSTOP of the leader past its lease: another leads meanwhile; once resumed, the stopped one stops acting
      // without an act (the audit below), and its term is revoked.
      await replicas.next((e) => e.event === 'act' && e.pid === leader.pid, 'the leader to act')
      const stopped = replicas.children.get(leader.pid)
      const elected = replicas.next((e) => e.event === 'elected' && e.pid !== leader.pid, 'a leader while one is stopped')
      stopped.kill('SIGSTOP')
      const successor = await elected
      const revoked = replicas.next((e) => e.event === 'revoked' && e.pid === leader.pid, 'the stopped leader revoked')
      stopped.kill('SIGCONT')
      expect((await revoked).reason).toBe('lost')
      leader = successor

      // resign(): another replica leads at once (the resigning one pauses `retry` before it campaigns again).
      await replicas.next((e) => e.event === 'act' && e.pid === leader.pid, 'the leader to act')
      const handover = replicas.next((e) => e.event === 'elected' && e.pid !== leader.pid, 'a leader after a resign')
      replicas.children.get(leader.pid).send({ resign: true })
      const after = await handover
      expect(BigInt(after.term)).toBeGreaterThan(BigInt(leader.term))
      await replicas.next((e) => e.event === 'act' && e.pid === after.pid, 'the new leader to act')
    } finally {
      await replicas.stopAll()
      observer.close()
    }
    const { terms, overlaps, fallingTerms } = replicas.audit()
    expect(terms).toBeGreaterThanOrEqual(5)
    expect(overlaps).toEqual([])
    expect(fallingTerms).toBe(0)
    expect(observed.size).toBeGreaterThanOrEqual(3)
  })
})
