'use strict'
// A lock handed over from one process to another (lock.handoff(), locker.adopt()): the adopter extends and releases
// it, the original can neither release nor renew it any more, and a forged token or an expired handle is refused
// without touching the key.

const { fork } = require('node:child_process')
const { once } = require('node:events')
const path = require('node:path')
const { redisCommand } = require('../support/redis-server')
const { uniqueKey, until } = require('../support/util')

jest.setTimeout(30_000)

const prefix = `${uniqueKey('handoff')}:`
const peers = []

/** A peer process named `name`; `ask(op, args)` resolves its answer (`{ value }` or `{ error }`). */
async function peer(name) {
  const child = fork(path.join(__dirname, '..', 'support', 'workers', 'handoff-peer.js'), {
    env: { ...process.env, SNATCH_PREFIX: prefix, PEER: name },
  })
  peers.push(child)
  await once(child, 'message')
  const ask = async (op, args) => {
    const answer = once(child, 'message')
    child.send({ op, ...args })
    return (await answer)[0]
  }
  return { child, ask }
}

afterAll(async () => {
  await Promise.all(peers.filter((p) => p.connected).map((p) => (p.send({ op: 'close' }), once(p, 'exit'))))
})

const value = (key) => redisCommand(process.env.REDIS_URL, 'GET', `${prefix}${key}`)
const pttl = (key) => redisCommand(process.env.REDIS_URL, 'PTTL', `${prefix}${key}`)

test('the adopter extends and releases; the original can no longer release nor extend; a used handle is refused', async () => {
  const [original, adopter] = await Promise.all([peer('original'), peer('adopter')])
  const key = 'order:42'
  const { value: locked } = await original.ask('lock', { key, ttl: 2000 })
  const { value: handle } = await original.ask('handoff')
  expect(handle).toEqual({ key, token: locked.token, fence: locked.fence, validUntil: expect.any(Number) })
  expect(handle.validUntil).toBeGreaterThan(Date.now())

  expect(await adopter.ask('adopt', { handle })).toEqual({ value: { fence: locked.fence } })
  expect(await value(key)).toMatch(/^[0-9a-f]{32}:adopter$/)
  expect(await adopter.ask('extend', { ttl: 10_000 })).toEqual({ value: true })
  expect(await pttl(key)).toBeGreaterThan(2000)

  expect(await original.ask('release')).toEqual({ value: false })
  expect(await original.ask('extend', { ttl: 10_000 })).toEqual({ value: false })
  expect(await original.ask('adopt', { handle })).toMatchObject({ error: { code: 'ERR_SNATCH_LOCK_LOST', reason: 'handoff' } })
  expect(await value(key)).toMatch(/:adopter$/)

  expect(await adopter.ask('release')).toEqual({ value: true })
  expect(await value(key)).toBeNull()
})

test('a forged token is refused and leaves the key as it was', async () => {
  const [original, forger] = await Promise.all([peer('original'), peer('forger')])
  const key = 'forged'
  await original.ask('lock', { key, ttl: 5000 })
  const { value: handle } = await original.ask('handoff')
  const held = await value(key)
  for (const token of [handle.token.replace(/^./, (c) => (c === '0' ? '1' : '0')), 'f'.repeat(32)]) {
    expect(await forger.ask('adopt', { handle: { ...handle, token } })).toMatchObject({
      error: { code: 'ERR_SNATCH_LOCK_LOST', reason: 'handoff' },
    })
  }
  expect(await forger.ask('adopt', { handle: { ...handle, token: 'not hex' } })).toMatchObject({
    error: { code: 'ERR_SNATCH_INVALID_ARG' },
  })
  expect(await value(key)).toBe(held)
  expect(await forger.ask('adopt', { handle })).toEqual({ value: { fence: handle.fence } })
  expect(await forger.ask('release')).toEqual({ value: true })
})

test('the original stops renewing at once: a handle not adopted expires with its lease, and is then refused', async () => {
  const [original, late] = await Promise.all([peer('original'), peer('late')])
  const key = 'expired'
  await original.ask('lock', { key, ttl: 500 })
  const { value: handle } = await original.ask('handoff')
  // Renewed, the key would stay; handed over, it lapses after the lease it had.
  await until(async () => (await pttl(key)) === -2, 'the key to lapse', 5000)
  expect(Date.now()).toBeGreaterThanOrEqual(handle.validUntil - 50)
  expect(await late.ask('adopt', { handle })).toMatchObject({ error: { code: 'ERR_SNATCH_LOCK_LOST', reason: 'handoff' } })
  expect(await value(key)).toBeNull()
})
