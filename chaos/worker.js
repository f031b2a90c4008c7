'use strict'
// One worker process of the chaos suite (forked by chaos/run.js): loops critical sections on a few shared keys with
// one way of locking (`lock`: Locker.lock + Lock.release; `withLock`; `snatchTask`; `read` and `write`: a read-write
// lock's read() or write() + Lock.release, sections marked `shared` for reads; `handoff`: Locker.lock, then
// Lock.handoff() halfway, the parent passing the handle to another worker, whose Locker.adopt() continues the section,
// marked `adopted`; `several`: two keys at once by Locker.lockAll + MultiLock.release or withLocks, a section of
// each key; `shared`: Locker.shared, whose runner has the section, every caller reporting the value it got;
// `idempotency`: requests with keys to its own Express app under redis-snatch/idempotency, whose handler has the
// section, every answer reported as a value; `stock`: withLock, then a read-modify-write of a stock row in Postgres or
// MariaDB, fenced or not, see once(); `reentrant`: withLock, and in its fn a nested withLock of the same key with
// `reentrant: true`, awaited or not, the section spanning both, see nested()) and reports each to the parent
// over IPC, on process.hrtime.bigint() (CLOCK_MONOTONIC: one clock for every process of the host); or (`schedule`)
// runs a schedule's job every second, each attempt a section (and reported as { type: 'attempt', … }, see schedule());
// or (`stored`) runs the stored schedules of a handler, each attempt a section on the schedule's id (see stored());
// or (`lead`) campaigns for leadership, each term a section (see lead()); or (`nest`) is a NestJS application whose
// @WithLock and @Snatch methods are the sections, and whose @Cron runs each attempt as a section (see nestSections()):
//   { type: 'enter', key, fence, t, shared, adopted }  the section started (sent at once, so a SIGKILL cannot lose it)
//   { type: 'exit', key, fence, t, last, cut }
//      `last`: the time of its last act; `cut`: it stopped acting because its lease could no longer be guaranteed
//      (validUntil passed or signal aborted); sent before the lock is released, so that
//      a SIGKILL during the release cannot leave the section open in the parent's eyes
//   { type: 'released', enter, t, released }  a Lock's release, called at `t`, answered `released`
//   { type: 'error', code, t }                a call failed (ERR_SNATCH_…)
//   { type: 'handoff', handle }               a lock handed over, for the parent to pass on: `{ adopt: handle }`
//   { type: 'value', key, got, fence }        shared mode: the value a caller of `key` got (its key, its fence)
//   { type: 'left', key, fence }              stock mode: a section ended, not timed (instead of 'exit')
//   { type: 'outcome', name }                 stock mode: how a decrement ended (committed, late, stale)
// A section acts a few times, each act only while the lease is still valid, checked synchronously right before it:
// the parent checks that no two holders' acts overlap. It stops on 'stop', finishing its section first; on SIGTERM it
// shuts down as docs/locks.md says (close with a timeout of `config.drainMs`, then exit): sections under way finish, or
// are cut when their signal aborts.

const { createLocker } = require('..')

const config = JSON.parse(process.argv[2])
// Idempotency mode's locker leases for `config.ttl` (the middleware's lock has the locker's). With `config.prefixes`,
// that many lockers, one per prefix (`<prefix><n>:`), and each key always locked by the same
// one: a prefix's fence counter is then counted up by a few keys only, and can expire between their sections.
const lockers = config.prefixes
  ? Array.from({ length: config.prefixes }, (_, n) => createLocker({ ...config.locker, prefix: `${config.locker.prefix}${n}:` }))
  : [createLocker(config.mode === 'idempotency' ? { ttl: config.ttl, ...config.locker } : config.locker)]
const [locker] = lockers
/** The locker of `key`: by a hash of its name, the same in every worker. */
const lockerOf = (key) => lockers[[...key].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 0) % lockers.length]
let stopping = false
/** Adoptions of locks handed over (handoff mode) under way: a stop waits for them. */
const adoptions = new Set()
process.on('message', (message) => {
  if (message === 'stop') stopping = true
  if (message.adopt) {
    const adoption = adopt(message.adopt).finally(() => adoptions.delete(adoption))
    adoptions.add(adoption)
  }
})

/** Handoff mode: continues the section of a lock another worker handed over, with its fence, and releases it. */
async function adopt(handle) {
  let lock
  try {
    lock = await lockerOf(handle.key).adopt(handle, { ttl: config.ttl })
  } catch (err) {
    // Refused: the handle expired on its way (its sender or this worker was stopped or killed meanwhile).
    send({ type: 'error', code: err.code || err.name, t: now() })
    return
  }
  const valid = () => !lock.signal.aborted && lock.validUntil > Date.now()
  const { enter, ...ended } = await section(handle.key, lock.fence, valid, false, true)
  const t = now()
  send({ type: 'exit', ...ended, t })
  send({ type: 'released', enter, t, released: await lock.release() })
}

const now = () => process.hrtime.bigint().toString()
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const pick = (list) => list[Math.floor(Math.random() * list.length)]
const send = (message) => process.connected && process.send(message)
/**
 * Sends `message`, resolving once it is written to the channel: a schedule's attempt reports its end so before its fn
 * returns, hence before its record can say 'ok' (a SIGKILL then cannot lose the report and keep the record).
 */
const sent = (message) => new Promise((resolve) => (process.connected ? process.send(message, undefined, {}, () => resolve()) : resolve()))

/**
 * The acts of one section of `key` (`adopted`: the rest of one another worker handed over, with its fence). Reports
 * the section's end.
 */
async function section(key, fence, valid, shared = false, adopted = false) {
  const { enter, last, cut } = await acts([{ key, fence }], valid, shared, adopted)
  return { key, fence: String(fence), last, cut, enter }
}

/**
 * The acts of a section over `held` (`[{ key, fence }]`: a lock, or each key of a set) reported started for each:
 * `config.acts` times, a short pause then an act, while `valid()` holds.
 */
async function acts(held, valid, shared = false, adopted = false) {
  const enter = now()
  for (const { key, fence } of held) send({ type: 'enter', key, fence: String(fence), t: enter, shared, adopted })
  // No act yet: the section's start (a process stopped right here acts next only if its lease is still valid).
  let last = enter
  let cut = false
  for (let i = 0; i < config.acts; i++) {
    await sleep(Math.random() * config.pauseMs)
    // The act, at the time its lease is checked: a process stopped between the check and the act (a window no lock
    // can close; fences do) is not counted against the check.
    const at = now()
    if (!valid()) {
      cut = true
      break
    }
    last = at
  }
  return { enter, last, cut }
}

/** A section over several keys held at once (`fences[i]` is `keys[i]`'s): its end reported for each key. */
async function setSection(keys, fences, valid) {
  const held = keys.map((key, i) => ({ key, fence: fences[i] }))
  const { enter, ...ended } = await acts(held, valid)
  const t = now()
  for (const { key, fence } of held) send({ type: 'exit', key, fence: String(fence), ...ended, t })
  return enter
}

/**
 * A run's section (withLock, snatchTask), its end reported from inside fn: before the run's lock is released. Each
 * act checks `validUntil` besides the signal, as docs/locks.md advises: a process stopped (SIGSTOP) in the middle may
 * run its next act before it hears that its signal aborted meanwhile.
 */
async function run(key, ctx) {
  const valid = () => !ctx.signal.aborted && ctx.validUntil > Date.now()
  const { enter, ...ended } = await section(key, ctx.fence, valid)
  send({ type: 'exit', ...ended, t: now() })
}

/**
 * Reentrant mode: a section of `key` begun in the fn of a withLock and ended in the fn of a withLock of the same key
 * nested in it (`reentrant: true`: same fence, under the outer lease), which the outer fn awaits or, half the time,
 * does not (its acts then go on after the outer fn returned: the lock must stay until they end). Each act checks the
 * validity of the fn it runs in. With `config.control`, the nested half is a plain function not awaited that acts
 * until the lease's first ttl ran out, as code nesting without a lock would: other holders then overlap it, which
 * the audit must see.
 */
async function nested(key, options) {
  const locker = lockerOf(key)
  let ended = false
  const valid = (ctx) => () => !ctx.signal.aborted && ctx.validUntil > Date.now()
  await locker
    .withLock(
      key,
      async (outer) => {
        const until = Date.now() + config.ttl
        const enter = now()
        send({ type: 'enter', key, fence: String(outer.fence), t: enter })
        const first = await steps(Math.ceil(config.acts / 2), valid(outer))
        const rest = async (ctx, stillValid) => {
          if (ctx && ctx.fence !== outer.fence) send({ type: 'error', code: 'NESTED_FENCE', t: now() })
          const second = first.cut ? first : await steps(Math.floor(config.acts / 2), stillValid)
          send({ type: 'exit', key, fence: String(outer.fence), t: now(), last: second.last ?? first.last ?? enter, cut: second.cut })
          ended = true
        }
        const inner = config.control
          ? rest(undefined, () => Date.now() < until)
          : locker.withLock(key, (ctx) => rest(ctx, valid(ctx)), { reentrant: true })
        if (config.control || Math.random() < 0.5) inner.catch(() => {})
        else await inner
      },
      options,
    )
    .catch((err) => {
      if (err.code !== 'ERR_SNATCH_LOCK_LOST' || !ended) throw err
    })
  return true
}

/** `n` acts, a short pause before each, while `valid()` holds: the last act's time, and whether they were cut. */
async function steps(n, valid) {
  let last
  for (let i = 0; i < n; i++) {
    await sleep(Math.random() * config.pauseMs)
    const at = now()
    if (!valid()) return { last, cut: true }
    last = at
  }
  return { last, cut: false }
}

/** Blocks the event loop for `ms` (the process stands still; the native threads acquire meanwhile). */
function standStill(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

/** One section by the configured way of locking; false when the key was not acquired (snatchTask). */
async function once(key) {
  const options = {
    ttl: config.ttl,
    wait: config.wait,
    ...(config.fair && { fair: true }),
    ...(config.autoExtend === false && { autoExtend: false }),
  }
  switch (config.mode) {
    case 'lock':
    case 'read':
    case 'write': {
      const o = { ...options, autoExtend: true }
      const rw = lockerOf(key).rwlock(key)
      const take = { lock: () => lockerOf(key).lock(key, o), read: () => rw.read(o), write: () => rw.write(o) }[config.mode]
      const lock = await take()
      const valid = () => !lock.signal.aborted && lock.validUntil > Date.now()
      const { enter, ...ended } = await section(key, lock.fence, valid, config.mode === 'read')
      const t = now()
      send({ type: 'exit', ...ended, t })
      send({ type: 'released', enter, t, released: await lock.release() })
      return true
    }
    case 'handoff': {
      // Half a section here, the other half in whichever worker the parent hands the lock to.
      const lock = await lockerOf(key).lock(key, { ...options, autoExtend: true })
      const valid = () => !lock.signal.aborted && lock.validUntil > Date.now()
      const { enter, ...ended } = await section(key, lock.fence, valid)
      const t = now()
      send({ type: 'exit', ...ended, t })
      if (ended.cut) send({ type: 'released', enter, t, released: await lock.release() })
      else send({ type: 'handoff', handle: lock.handoff() })
      return true
    }
    case 'several': {
      // Two keys at once, named in random order: lockAll + release, or withLocks, at random.
      const keys = [key, pick(config.keys.filter((k) => k !== key))]
      if (Math.random() < 0.5) keys.reverse()
      if (Math.random() < 0.5) {
        const set = await lockerOf(key).lockAll(keys, { ...options, autoExtend: true })
        const enter = await setSection(keys, set.fences, () => !set.signal.aborted && set.validUntil > Date.now())
        send({ type: 'released', enter, t: now(), released: await set.release() })
        return true
      }
      let ended = false
      await lockerOf(key)
        .withLocks(
          keys,
          (ctx) => setSection(keys, ctx.fences, () => !ctx.signal.aborted && ctx.validUntil > Date.now()).then(() => (ended = true)),
          options,
        )
        .catch((err) => {
          if (err.code !== 'ERR_SNATCH_LOCK_LOST' || !ended) throw err
        })
      return true
    }
    case 'shared': {
      // A shared result: the caller that runs fn has the section; every caller reports the value it got.
      const value = await lockerOf(key).shared(
        key,
        async (ctx) => {
          const { enter, ...ended } = await section(key, ctx.fence, () => !ctx.signal.aborted && ctx.validUntil > Date.now())
          send({ type: 'exit', ...ended, t: now() })
          return { key, fence: ctx.fence }
        },
        { ttl: config.ttl, wait: config.wait, resultTtl: 20 },
      )
      send({ type: 'value', key, got: value.key, fence: String(value.fence) })
      return true
    }
    case 'idempotency': {
      // A request with the key to this replica's app: its handler has the section (when it runs); the answer, run
      // or replayed, is reported as a value.
      const res = await fetch(`http://127.0.0.1:${httpPort}/pay`, { method: 'POST', headers: { 'idempotency-key': key } })
      if (res.status === 409) return false
      if (res.status !== 201) throw Object.assign(new Error(`HTTP ${res.status}`), { code: `HTTP_${res.status}` })
      const value = await res.json()
      send({ type: 'value', key, got: value.key, fence: value.fence })
      return true
    }
    case 'stock': {
      // The overselling code (docs/locks.md, "Fences in your database"): under the lock, read the stock and write back
      // what was read minus one, in a transaction; with `config.fenced`, fenced's, else a plain one. The signal is
      // not passed and validUntil not checked: a holder that wakes late writes anyway, and only the database's check
      // of its fence stands in the way. The section ends ('left') as fn does; no act is timed (no overlap check).
      const { dialect, table } = config.stock
      let fence
      const decrement = async (tx) => {
        const qty = await readStock(dialect, tx, table, key)
        await sleep(Math.random() * config.pauseMs) // the work between the read and the write
        await writeStock(dialect, tx, table, key, qty - 1, fence, `worker ${process.pid}`)
      }
      // committed, or stale (refused by the fence); 'late' once committed after the lease was lost.
      let outcome
      const lost = await lockerOf(key)
        .withLock(
          key,
          async (ctx) => {
            fence = ctx.fence
            send({ type: 'enter', key, fence: String(fence), t: now() })
            try {
              await sleep(Math.random() * config.pauseMs) // work before the transaction (a price looked up, say)
              await (config.fenced ? fenced(stockDb, key, fence, decrement) : transaction(dialect, stockDb, decrement))
              outcome = 'committed'
            } catch (err) {
              if (err.code !== 'ERR_SNATCH_STALE_FENCE') throw err
              outcome = 'stale'
            } finally {
              send({ type: 'left', key, fence: String(fence) })
            }
          },
          options,
        )
        .then(
          () => false,
          (err) => {
            // The lease was lost by the time fn ended (its stale write refused, or committed late): as it ended.
            if (outcome === undefined || err.code !== 'ERR_SNATCH_LOCK_LOST') throw err
            return true
          },
        )
      send({ type: 'outcome', name: outcome === 'committed' && lost ? 'late' : outcome })
      return true
    }
    case 'withLock': {
      let ended = false
      const running = lockerOf(key).withLock(key, (ctx) => run(key, ctx).then(() => (ended = true)), options)
      if (config.standStillMs) standStill(config.standStillMs)
      await running.catch((err) => {
        // A lease that lapsed while the process stood still, before fn: not acquired.
        if (config.standStillMs && err.code === 'ERR_SNATCH_TIMEOUT') return
        if (err.code !== 'ERR_SNATCH_LOCK_LOST' || !ended) throw err
      })
      return true
    }
    case 'reentrant':
      return nested(key, options)
    case 'nest': {
      // A @WithLock or a @Snatch method, at random; its fn's end is reported from inside, as for withLock.
      const [method, settled] = pick([['withLock', true], ['snatch', undefined]])
      let ended = false
      const ran = await nestApp[method](key, () => (ended = true)).catch((err) => {
        if (err.code !== 'ERR_SNATCH_LOCK_LOST' || !ended) throw err
        return true
      })
      return settled ?? ran === true
    }
    default: {
      let ended = false
      return lockerOf(key)
        .snatchTask(key, (ctx) => run(key, ctx).then(() => (ended = true)), { ttl: config.ttl })
        .then(
          (r) => r.ran,
          (err) => {
            if (err.code !== 'ERR_SNATCH_LOCK_LOST' || !ended) throw err
            return true
          },
        )
    }
  }
}

/**
 * Schedule mode: schedules 'chaos-job' every second and 'chaos-sparse' every 10 s (`config.schedule`: their options),
 * each attempt a section whose key is the schedule's name (with the default `concurrency: 'forbid'`, no two attempts
 * of a schedule may act at once, and its fences rise), reported with what it was ({ type: 'attempt', name, tick,
 * manual, attempt, why, fence }). Besides the signal, each act checks a local deadline of half the lease from the call:
 * a process stopped (SIGSTOP) in the middle cannot know before acting that its signal aborted meanwhile. An attempt
 * cut short throws, so that its record does not say 'ok'.
 */
function schedule() {
  const deadlineMs = config.ttl / 2
  const tasks = [
    ['chaos-job', '* * * * * *'],
    ['chaos-sparse', '*/10 * * * * *'],
  ].map(([name, cron]) => {
    const task = locker.schedule(
      name,
      cron,
      async ({ tick, attempt, why, fence, signal }) => {
        const manual = why === 'manual' || (why === 'retry' && tick.getMilliseconds() !== 0)
        send({ type: 'attempt', name, tick: tick.getTime(), manual, attempt, why, fence: String(fence) })
        const until = Date.now() + deadlineMs
        const ended = await section(name, fence, () => !signal.aborted && Date.now() < until)
        await sent({ type: 'exit', ...ended, t: now() })
        if (ended.cut) throw new Error('cut short')
      },
      { ttl: config.ttl, ...config.schedule },
    )
    task.on('error', (err) => err.message !== 'cut short' && send({ type: 'error', code: err.code || err.name, t: now() }))
    return task
  })
  process.on('message', async (message) => {
    if (message !== 'stop') return
    await Promise.all(tasks.map((task) => task.stop()))
    await locker.close()
    process.disconnect()
  })
}

/**
 * Lead mode: campaigns for 'chaos-leader' (`config.ttl`, `config.retry`); each term is a section of `config.acts`
 * acts (then fn returns and the replica campaigns again), each act only while ctx.validUntil is ahead and the signal
 * has not aborted (validUntil also holds right after a SIGSTOP, before the signal's abort can arrive).
 */
function lead() {
  const name = 'chaos-leader'
  const leadership = locker.lead(
    name,
    async (ctx) => {
      const ended = await section(name, ctx.term, () => !ctx.signal.aborted && ctx.validUntil > Date.now())
      send({ type: 'exit', ...ended, t: now() })
    },
    { ttl: config.ttl, retry: config.retry },
  )
  leadership.on('error', (err) => send({ type: 'error', code: err.code || err.name, t: now() }))
  process.on('message', async (message) => {
    if (message !== 'stop') return
    await leadership.stop()
    await locker.close()
    process.disconnect()
  })
}

/**
 * Nest mode: a NestJS application (redis-snatch/nest) on `config.locker`, whose sections are its methods: `withLock`
 * (@WithLock) and `snatch` (@Snatch) on the key they are called with, each act checked against `currentRun()`'s
 * signal and validUntil; and whose @Cron 'chaos-nest-job' runs every second, each attempt a section reported as in
 * schedule mode. Resolves the application's methods and `close()`.
 */
async function nestSections() {
  require('reflect-metadata')
  const { Injectable, Module } = require('@nestjs/common')
  const { NestFactory } = require('@nestjs/core')
  const { Cron } = require('@nestjs/schedule')
  const { currentRun, Snatch, SnatchModule, SnatchSchedule, WithLock } = require('../lib/nest')
  const name = 'chaos-nest-job'
  class Sections {
    async withLock(key, ended) {
      await run(key, currentRun())
      ended()
    }

    async snatch(key, ended) {
      await run(key, currentRun())
      ended()
      return true
    }

    async job() {
      const ctx = currentRun()
      const { tick, attempt, why, fence } = ctx
      send({ type: 'attempt', name, tick: tick.getTime(), manual: why === 'manual', attempt, why, fence: String(fence) })
      const { enter, ...ended } = await section(name, fence, () => !ctx.signal.aborted && ctx.validUntil > Date.now())
      send({ type: 'exit', ...ended, t: now() })
      if (ended.cut) throw new Error('cut short')
    }
  }
  const decorate = (method, ...decorators) => {
    const descriptor = Object.getOwnPropertyDescriptor(Sections.prototype, method)
    Object.defineProperty(Sections.prototype, method, Reflect.decorate(decorators, Sections.prototype, method, descriptor))
  }
  decorate('withLock', WithLock((key) => key, { ttl: config.ttl, wait: config.wait }))
  decorate('snatch', Snatch((key) => key, { ttl: config.ttl }))
  decorate('job', Cron('* * * * * *', { name, timeZone: 'UTC' }), SnatchSchedule({ ttl: config.ttl }))
  Injectable()(Sections)
  class AppModule {}
  Module({ imports: [SnatchModule.forRoot(config.locker)], providers: [Sections] })(AppModule)
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false })
  const sections = app.get(Sections)
  return { withLock: (key, ended) => sections.withLock(key, ended), snatch: (key, ended) => sections.snatch(key, ended), close: () => app.close() }
}

/** The Nest application of nest mode. */
let nestApp

/** Stock mode: the pool of `config.stock`'s database (__test__/support/stock.js). */
const { readStock, writeStock, transaction, openPool } = config.mode === 'stock' ? require('../__test__/support/stock') : {}
const { fenced } = require('../lib/fence')
const stockDb = config.mode === 'stock' ? openPool(config.stock.dialect, config.stock.db, 2) : undefined

// The shutdown recipe of docs/locks.md: nothing new is taken, what runs gets `config.drainMs` to finish, then the process exits.
process.once('SIGTERM', async () => {
  stopping = true
  await Promise.all([...lockers.map((l) => l.close({ timeout: config.drainMs ?? 0 })), nestApp?.close()])
  process.exit(0)
})

/** Idempotency mode: the port of this replica's Express app, whose POST /pay runs under redis-snatch/idempotency. */
let httpPort

/** Idempotency mode: starts the app; its handler is a section on the request's key, answering `{ key, fence }`. */
async function serve() {
  const express = require('express')
  const { idempotency } = require('../lib/idempotency')
  const app = express()
  app.post('/pay', idempotency(locker, { ttl: 30 }), async (req, res) => {
    const key = req.get('idempotency-key')
    const run = req.idempotency
    const { enter, ...ended } = await section(key, run.fence, () => !run.signal.aborted && run.validUntil > Date.now())
    send({ type: 'exit', ...ended, t: now() })
    res.status(201).json({ key, fence: String(run.fence) })
  })
  const server = app.listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  httpPort = server.address().port
}

/**
 * Stored mode: runs handler 'chaos-stored' (the operator in chaos/run.js upserts, changes and removes its schedules);
 * each attempt is a section on the stored schedule's id, reported as { type: 'attempt', name: id, … }.
 */
function stored() {
  const deadlineMs = config.ttl / 2
  const running = locker.handle('chaos-stored', async (ctx) => {
    const { id, tick, attempt, why, fence } = ctx
    send({ type: 'attempt', name: id, tick: tick.getTime(), manual: why === 'manual', attempt, why, fence: String(fence), at: Date.now() })
    const until = Date.now() + deadlineMs
    const ended = await section(id, fence, () => !ctx.signal.aborted && ctx.validUntil > Date.now() && Date.now() < until)
    await sent({ type: 'exit', ...ended, t: now() })
    if (ended.cut) throw new Error('cut short')
  })
  running.on('error', (err) => err.message !== 'cut short' && send({ type: 'error', code: err.code || err.name, t: now() }))
  process.on('message', async (message) => {
    if (message !== 'stop') return
    await running.stop()
    await locker.close()
    process.disconnect()
  })
}

async function main() {
  if (config.mode === 'schedule') return schedule()
  if (config.mode === 'stored') return stored()
  if (config.mode === 'idempotency') await serve()
  if (config.mode === 'lead') return lead()
  if (config.mode === 'nest') nestApp = await nestSections()
  while (!stopping) {
    try {
      const ran = await once(pick(config.keys))
      // A snatchTask that lost the key backs off a moment, as a replica would.
      if (!ran) await sleep(Math.random() * 2)
      // Idle a while (config.idleMs), so that keys' fence counters expire between their sections.
      if (config.idleMs) await sleep(Math.random() * config.idleMs)
    } catch (err) {
      send({ type: 'error', code: err.code || err.name, message: String(err.message).slice(0, 200), t: now() })
      await sleep(20)
    }
  }
  await Promise.all(adoptions)
  await Promise.all([...lockers.map((l) => l.close()), nestApp?.close(), stockDb?.end()])
  process.disconnect()
}

main()
