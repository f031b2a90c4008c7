'use strict'
// The dashboard's page in a real headless browser (the system's Chromium, driven by puppeteer-core), against a real
// Redis with two replica processes running schedules: what it shows against the locker's answers, its actions with
// `actions: true` and none without, a key named like markup shown as text, and the banner while Redis is down. Where
// no Chromium exists it is skipped with a printed reason, except when SNATCH_REQUIRE_BROWSER is set (CI sets it).

const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const { fork } = require('node:child_process')
const { createLocker } = require('../..')
const { createDashboard } = require('redis-snatch/dashboard')
const { startRedis } = require('../support/redis-server')

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome']
  .filter(Boolean)
  .find((file) => fs.existsSync(file))
if (!CHROMIUM && process.env.SNATCH_REQUIRE_BROWSER) {
  throw new Error('SNATCH_REQUIRE_BROWSER is set but no Chromium was found: install it (Debian: apt-get install chromium)')
}
if (!CHROMIUM) {
  console.log('dashboard browser tests skipped: no Chromium (Debian: apt-get install chromium; or set CHROMIUM_PATH)')
}
const describeWithBrowser = CHROMIUM ? describe : describe.skip

/** Where the test run saves its screenshot of the page (one is committed as docs/dashboard.png). */
const SCREENSHOT = path.join(__dirname, '..', '..', 'target', 'dashboard.png')
const XSS_KEY = '<img src=x onerror=alert(1)>'

describeWithBrowser('the dashboard in Chromium', () => {
  let puppeteer
  let browser
  let server
  let locker
  let replicas
  const listeners = []

  /** The dashboard of `locker` with `options`, served on a free port; its URL. */
  async function serve(options) {
    const listener = http.createServer(createDashboard(locker, options))
    await new Promise((resolve) => listener.listen(0, '127.0.0.1', resolve))
    listeners.push(listener)
    return `http://127.0.0.1:${listener.address().port}/`
  }

  /** A new page at `url`, failing the test on any dialog other than the confirmations it expects. */
  async function open(url) {
    const page = await browser.newPage()
    page.dialogs = []
    page.on('dialog', async (dialog) => {
      page.dialogs.push(dialog.message())
      await (dialog.type() === 'confirm' ? dialog.accept() : dialog.dismiss())
    })
    await page.setViewport({ width: 1200, height: 900 })
    await page.goto(url)
    await page.waitForSelector('#schedules tbody tr')
    return page
  }

  /** The rows of the schedules table: `{ name, last, state, health, buttons }` each. */
  const scheduleRows = (page) =>
    page.$$eval('#schedules tbody tr', (rows) =>
      rows.map((tr) => ({
        name: tr.dataset.name,
        last: tr.cells[3].querySelector('.outcome')?.textContent ?? null,
        state: tr.cells[5].textContent,
        health: tr.cells[6].textContent,
        buttons: [...tr.querySelectorAll('button')].map((b) => b.textContent),
      })),
    )

  /**
   * Clicks `selector`, finding it again when the page re-rendered its table between finding and clicking it (the
   * node is then detached, and puppeteer throws before it clicks).
   */
  async function click(page, selector) {
    for (let tries = 1; ; tries++) {
      try {
        return await page.click(selector)
      } catch (err) {
        if (tries === 10 || !/detached/i.test(err.message)) throw err
      }
    }
  }

  /** Resolves once `check()` (run in the test) resolves true; fails after `ms`. */
  async function until(what, check, ms = 10_000) {
    const deadline = Date.now() + ms
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }

  beforeAll(async () => {
    puppeteer = require('puppeteer-core')
    server = await startRedis()
    locker = createLocker({ url: server.url, commandTimeout: 500 })
    replicas = await Promise.all(
      ['replica-a', 'replica-b'].map(
        (name) =>
          new Promise((resolve) => {
            const child = fork(path.join(__dirname, '..', 'support', 'workers', 'dashboard-replica.js'), [name], {
              env: { ...process.env, REDIS_URL: server.url },
            })
            child.once('message', () => resolve(child))
          }),
      ),
    )
    browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] })
    // Every schedule has a last outcome: report and sync have run (sync failed).
    await until('a run of each frequent schedule', async () => {
      const schedules = await locker.schedules()
      return ['report', 'sync'].every((name) => schedules.find((s) => s.name === name)?.last)
    })
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    for (const listener of listeners) listener.close()
    await Promise.all(
      (replicas ?? []).map((child) => new Promise((resolve) => (child.once('exit', resolve), child.send('stop')))),
    )
    await locker?.close()
    await server?.stop()
  })

  test('shows every schedule with its last outcome, as the locker has them, and a failed run\'s error as text', async () => {
    const held = await locker.tryLock('orders:4711', { ttl: 60_000 })
    const page = await open(await serve({ actions: true }))
    await until('the failed sync in the page', async () => (await scheduleRows(page)).find((r) => r.name === 'sync')?.last === 'failed')
    const rows = await scheduleRows(page)
    const schedules = await locker.schedules()
    expect(rows.map((r) => r.name)).toEqual(schedules.map((s) => s.name))
    expect(rows.map((r) => r.name)).toEqual(['cleanup', 'report', 'sync'])
    for (const row of rows) {
      const info = schedules.find((s) => s.name === row.name)
      expect(row.last).toBe(info.last ? info.last.outcome : null)
      expect(row.health).toBe(info.health)
    }
    expect(rows.find((r) => r.name === 'sync').health).toBe('failing')
    expect(rows.find((r) => r.name === 'cleanup').buttons).toEqual(['trigger', 'suspend'])
    // The failed schedule's runs: the timeline's bars and the records with the error as text.
    await click(page, '#schedules tr[data-name="sync"] td:first-child a')
    await page.waitForSelector('#records tbody tr')
    expect(await page.$$eval('#timeline rect.bar-failed', (bars) => bars.length)).toBeGreaterThan(0)
    expect(await page.$eval('#records tbody tr td:last-child', (td) => td.textContent)).toBe(
      'upstream answered 503 <b>Service Unavailable</b>',
    )
    expect(await page.$('#records b')).toBeNull()
    expect(await page.$eval('#connection', (p) => p.textContent)).toMatch(/^server: redis:\/\/127\.0\.0\.1:\d+ (Redis|Valkey) /)
    await page.close()
    await held.release()
  }, 30_000)

  test('trigger makes a run appear within 3 s; suspend shows on the row and stops the runs; resume', async () => {
    const page = await open(await serve({ actions: true }))
    const manualRuns = async () => (await locker.history('cleanup')).filter((r) => r.why === 'manual').length
    const before = await manualRuns()
    await click(page, '#schedules tr[data-name="cleanup"] td:first-child a') // its runs: none yet (hourly)
    await page.waitForSelector('#detail:not([hidden])')
    const clicked = Date.now()
    await click(page, '#schedules tr[data-name="cleanup"] button[title="run cleanup once now"]')
    await page.waitForFunction(
      () => [...document.querySelectorAll('#records tbody tr')].some((tr) => tr.cells[2].textContent.startsWith('manual')),
      { timeout: 3000 },
    )
    expect(Date.now() - clicked).toBeLessThan(3000)
    expect(await manualRuns()).toBe(before + 1)

    await click(page, '#schedules tr[data-name="report"] button[title="suspend report"]')
    await until('report suspended in the page', async () => (await scheduleRows(page)).find((r) => r.name === 'report').state.includes('suspended'))
    expect((await locker.schedules()).find((s) => s.name === 'report').suspended).toBe(true)
    // The next two ticks (every 2 s) are recorded, and neither ran: each is missed, reason suspended.
    const suspendedAt = Date.now()
    const since = async () => (await locker.history('report')).filter((r) => r.tick.getTime() > suspendedAt)
    await until('two ticks recorded since the suspension', async () => (await since()).length >= 2, 15_000)
    const records = await since()
    expect(records.map((r) => [r.outcome, r.reason])).toEqual(records.map(() => ['missed', 'suspended']))
    await click(page, '#schedules tr[data-name="report"] button[title="resume report"]')
    await until('report active again', async () => !(await locker.schedules()).find((s) => s.name === 'report').suspended)
    await page.close()
  }, 30_000)

  test('force release (confirmed) deletes a held lock and aborts its holder\'s signal', async () => {
    // Renewed every second: the first renewal after the release is refused, and the signal aborts.
    const held = await locker.tryLock('invoice:42', { ttl: 3000, autoExtend: true })
    const page = await open(await serve({ actions: true }))
    await page.waitForSelector('#locks tr[data-key="invoice:42"]')
    await click(page, '#locks tr[data-key="invoice:42"] button')
    await until('the holder\'s signal to abort', async () => held.signal.aborted)
    expect(page.dialogs).toEqual(['Force-release lock "invoice:42"? Its holder\'s signal aborts.'])
    expect(await locker.inspect('invoice:42')).toBeNull()
    await held.release()
    await page.close()
  }, 30_000)

  test('without actions: no button to act, and the action endpoints answer 403 to the page', async () => {
    const held = await locker.tryLock('readonly:1', { ttl: 30_000 })
    const page = await open(await serve())
    await page.waitForSelector('#locks tr[data-key="readonly:1"]')
    expect(await page.$$eval('button', (buttons) => buttons.length)).toBe(0)
    // A schedule's runs still show.
    await click(page, '#schedules tr[data-name="sync"] td:first-child a')
    await page.waitForSelector('#records tbody tr')
    const statuses = await page.evaluate(async () =>
      Promise.all(
        ['trigger', 'suspend', 'resume', 'release'].map(async (action) => {
          const res = await fetch(`api/${action}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"report","key":"readonly:1"}' })
          return res.status
        }),
      ),
    )
    expect(statuses).toEqual([403, 403, 403, 403])
    expect(await locker.inspect('readonly:1')).not.toBeNull()
    await held.release()
    await page.close()
  }, 30_000)

  test('a key named like markup is shown as its characters', async () => {
    const held = await locker.tryLock(XSS_KEY, { ttl: 30_000 })
    const page = await open(await serve({ actions: true }))
    await page.waitForFunction((key) => [...document.querySelectorAll('#locks td')].some((td) => td.textContent === key), {}, XSS_KEY)
    expect(await page.$('img')).toBeNull()
    expect(page.dialogs).toEqual([])
    await held.release()
    await page.close()
  }, 30_000)

  test('the page after a while, with the failing schedule\'s runs open: saved as a screenshot', async () => {
    const held = await locker.tryLock('orders:4711', { ttl: 60_000 })
    const exports = locker.semaphore('exports', 4)
    const permits = [await exports.tryAcquire({ ttl: 60_000 }), await exports.tryAcquire({ ttl: 60_000 })]
    const page = await open(await serve({ actions: true }))
    await page.waitForSelector('#semaphores tr[data-key="exports"]')
    expect(await page.$eval('#semaphores tr[data-key="exports"]', (tr) => tr.cells[1].textContent)).toBe('2 of 4')
    await click(page, '#schedules tr[data-name="sync"] td:first-child a')
    await page.waitForSelector('#timeline rect.bar-failed')
    fs.mkdirSync(path.dirname(SCREENSHOT), { recursive: true })
    await page.screenshot({ path: SCREENSHOT, fullPage: true })
    expect(fs.statSync(SCREENSHOT).size).toBeGreaterThan(10_000)
    await page.close()
    await held.release()
    for (const permit of permits) await permit.release()
  }, 30_000)

  test('Redis stopped: a banner says so; back, the page recovers by itself', async () => {
    const page = await open(await serve())
    expect(await page.$eval('#banner', (b) => b.hidden)).toBe(true)
    server.pause()
    try {
      await page.waitForFunction(() => !document.getElementById('banner').hidden, { timeout: 10_000 })
      expect(await page.$eval('#banner', (b) => b.textContent)).toMatch(/^Redis is unreachable \(RedisError: /)
      // What was last read stays on the page.
      expect((await scheduleRows(page)).map((r) => r.name)).toEqual(['cleanup', 'report', 'sync'])
    } finally {
      server.resume()
    }
    await page.waitForFunction(() => document.getElementById('banner').hidden, { timeout: 10_000 })
    await page.close()
  }, 30_000)
})
