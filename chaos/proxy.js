'use strict'
// A small TCP proxy of the chaos suite, on 127.0.0.1, between the workers and a redis-server: it can delay every
// chunk each way (a slow link) and reset connections (a dropping link).

const net = require('node:net')

/**
 * Starts a proxy to 127.0.0.1:`port`; resolves `{ port, url, setLatency(ms), resetAll(), resetOne(), close() }`.
 * `latency` ms are added to every chunk, in each direction, keeping the order.
 */
async function startProxy(port, { latency = 0 } = {}) {
  const pairs = new Set()
  let delay = latency
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port })
    const pair = { client, upstream }
    pairs.add(pair)
    const end = () => {
      pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ]) {
      from.setNoDelay(true)
      // Chunks leave in the order they came, each `delay` ms after it came.
      let queue = Promise.resolve()
      from.on('data', (chunk) => {
        const due = Date.now() + delay
        queue = queue.then(async () => {
          const wait = due - Date.now()
          if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
          if (!to.destroyed) to.write(chunk)
        })
      })
      from.on('error', end)
      from.on('close', end)
    }
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const own = server.address().port
  /** Resets `pair`'s two connections (RST), as a dropped link does. */
  const reset = (pair) => {
    pairs.delete(pair)
    pair.client.resetAndDestroy()
    pair.upstream.resetAndDestroy()
  }
  return {
    port: own,
    url: `redis://127.0.0.1:${own}`,
    setLatency: (ms) => {
      delay = ms
    },
    /** Resets one connection at random; false when there is none. */
    resetOne: () => {
      const list = [...pairs]
      if (list.length === 0) return false
      reset(list[Math.floor(Math.random() * list.length)])
      return true
    },
    resetAll: () => [...pairs].forEach(reset),
    close: () =>
      new Promise((resolve) => {
        for (const pair of pairs) reset(pair)
        server.close(resolve)
      }),
  }
}

module.exports = { startProxy }
