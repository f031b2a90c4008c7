'use strict'
// One benchmark run in a fresh process (forked by run.js): one library, one scenario, one concurrency, on the single
// redis-server (`job.url`) or on a deployment (`job.deployment`, the adapter's connection options). Sends the
// summary, with this process's peak RSS, to the parent; in soak mode also an RSS sample per second.

const { createAdapter } = require('./libs')
const { measure } = require('./lib/measure')
const { SCENARIOS } = require('./lib/scenarios')

const TTL_MS = 30_000
const SAMPLE_INTERVAL_MS = 1000

/** Run the job described by the parent; resolve what to send back. */
async function main(job) {
  const { url, deployment, prefix } = job
  const lib = await createAdapter(job.lib, { url, deployment, prefix, ttl: TTL_MS })
  const rss = []
  const sampler = job.soak && setInterval(() => rss.push(process.memoryUsage.rss()), SAMPLE_INTERVAL_MS)
  const summary = await measure(job, SCENARIOS[job.scenario].loop(lib))
  clearInterval(sampler)
  await lib.close()
  return { ...summary, maxRss: process.resourceUsage().maxRSS * 1024, rss }
}

main(JSON.parse(process.argv[2])).then(
  (result) => process.send({ result }, () => process.exit(0)),
  (err) => process.send({ error: err.stack || String(err) }, () => process.exit(1)),
)
