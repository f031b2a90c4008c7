'use strict'

const { startRedis, redisCommand } = require('../support/redis-server')

test('globalSetup exports a reachable REDIS_URL to the workers', async () => {
  expect(process.env.REDIS_URL).toMatch(/^rediss?:\/\//)
  await expect(redisCommand(process.env.REDIS_URL, 'PING')).resolves.toBe('PONG')
})

describe('a second redis-server', () => {
  let server
  beforeAll(async () => {
    server = await startRedis()
  })
  afterAll(() => server.stop())

  test('answers on its own port, with parsed replies', async () => {
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`)
    expect(await redisCommand(server.url, 'SET', 'harness:k', 'välue')).toBe('OK')
    expect(await redisCommand(server.url, 'GET', 'harness:k')).toBe('välue')
    expect(await redisCommand(server.url, 'GET', 'harness:missing')).toBeNull()
    expect(await redisCommand(server.url, 'INCR', 'harness:n')).toBe(1)
    expect(await redisCommand(server.url, 'MGET', 'harness:k', 'harness:missing')).toEqual(['välue', null])
    await expect(redisCommand(server.url, 'INCR', 'harness:k')).rejects.toThrow(/not an integer/)
  })

  test('selects the database given in the URL', async () => {
    await redisCommand(`${server.url}/2`, 'SET', 'harness:db', 'two')
    expect(await redisCommand(`${server.url}/2`, 'GET', 'harness:db')).toBe('two')
    expect(await redisCommand(server.url, 'EXISTS', 'harness:db')).toBe(0)
  })

  test('kill() stops it hard; restart() brings it back empty on the same port', async () => {
    const { pid } = server.process
    await server.kill()
    await expect(redisCommand(server.url, 'PING')).rejects.toMatchObject({ code: 'ECONNREFUSED' })
    await server.restart()
    expect(server.process.pid).not.toBe(pid)
    expect(await redisCommand(server.url, 'PING')).toBe('PONG')
    expect(await redisCommand(server.url, 'GET', 'harness:k')).toBeNull()
  })

  test('pause() makes commands time out until resume()', async () => {
    server.pause()
    try {
      await expect(redisCommand({ url: server.url, timeout: 200 }, 'PING')).rejects.toThrow(/did not reply/)
    } finally {
      server.resume()
    }
    expect(await redisCommand({ url: server.url, timeout: 2000 }, 'PING')).toBe('PONG')
  })
})
