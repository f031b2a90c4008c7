'use strict'
// The API reference site (`npm run docs`, TypeDoc, in docs/site) in a real headless browser (the system's Chromium,
// driven by puppeteer-core), opened from the files with nothing else served: its front page is the README, its index
// lists the exports and the guides, a page of the reference shows a doc comment, and it loads nothing from another
// origin. Saves a screenshot of the front page (one is committed as docs/site.png). Skipped without Chromium, except
// when SNATCH_REQUIRE_BROWSER is set (CI sets it).

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { pathToFileURL } = require('node:url')

const root = path.join(__dirname, '..', '..')
const site = path.join(root, 'docs', 'site')
const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome']
  .filter(Boolean)
  .find((file) => fs.existsSync(file))
if (!CHROMIUM && process.env.SNATCH_REQUIRE_BROWSER) {
  throw new Error('SNATCH_REQUIRE_BROWSER is set but no Chromium was found: install it (Debian: apt-get install chromium)')
}
const describeWithBrowser = CHROMIUM ? describe : describe.skip

/** Where the test run saves its screenshot of the front page (one is committed as docs/site.png). */
const SCREENSHOT = path.join(root, 'target', 'docs-site.png')

jest.setTimeout(60_000)

describeWithBrowser('the docs site in Chromium', () => {
  let browser
  beforeAll(async () => {
    // npm test builds it before Jest; a Jest run of its own builds it here.
    if (!fs.existsSync(path.join(site, 'index.html'))) execFileSync('npx', ['typedoc'], { cwd: root, stdio: 'ignore' })
    browser = await require('puppeteer-core').launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] })
  })
  afterAll(() => browser?.close())

  test('its front page is the README, its index lists the exports and guides, and it loads nothing from elsewhere', async () => {
    const page = await browser.newPage()
    const foreign = []
    page.on('request', (request) => !request.url().startsWith('file:') && !request.url().startsWith('data:') && foreign.push(request.url()))
    await page.setViewport({ width: 1280, height: 900 })
    await page.goto(pathToFileURL(path.join(site, 'index.html')).href, { waitUntil: 'load' })
    expect(await page.$eval('h1', (h) => h.textContent)).toContain('redis-snatch')
    const text = await page.evaluate(() => document.body.innerText)
    expect(text).toContain('Run scheduled work and critical sections on exactly one replica')
    await page.screenshot({ path: SCREENSHOT })
    const links = await page.$$eval('a', (anchors) => anchors.map((a) => a.textContent.trim()))
    for (const name of ['index', 'idempotency', 'nest', 'otel']) expect(links).toContain(name)

    await page.goto(pathToFileURL(path.join(site, 'classes', 'index.Locker.html')).href, { waitUntil: 'load' })
    expect(await page.evaluate(() => document.body.innerText)).toContain('One caller across the fleet runs fn')
    await page.goto(pathToFileURL(path.join(site, 'documents', 'docs_SAFETY.html')).href, { waitUntil: 'load' })
    expect(await page.evaluate(() => document.body.innerText)).toContain('what redis-snatch guarantees')
    expect(foreign).toEqual([])
  })
})
