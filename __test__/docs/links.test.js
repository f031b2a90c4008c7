'use strict'
// The links between the docs (README.md, ARCHITECTURE.md, CHANGELOG.md, CONTRIBUTING.md, docs/*.md): every relative
// link names a file that exists, and every anchor (`#…`, in the same page or another) a heading of its page, by
// GitHub's rule for a heading's id.

const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..', '..')
const pages = ['README.md', 'ARCHITECTURE.md', 'CHANGELOG.md', 'CONTRIBUTING.md', ...fs.readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)]

/** A page's text with its fenced code blocks and inline code removed (links there are not links). */
function prose(file) {
  return fs.readFileSync(path.join(root, file), 'utf8').replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '')
}

/** The ids GitHub gives the headings of `file`: lower case, punctuation removed, spaces as '-', repeats numbered. */
function anchors(file) {
  const seen = new Map()
  const ids = new Set()
  const text = fs.readFileSync(path.join(root, file), 'utf8').replace(/^```[\s\S]*?^```/gm, '')
  for (const [, heading] of text.matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
    const base = heading
      .replace(/`/g, '')
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    ids.add(n === 0 ? base : `${base}-${n}`)
  }
  return ids
}

test.each(pages)('the links of %s lead somewhere', (page) => {
  const broken = []
  for (const [, target] of prose(page).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    if (/^[a-z]+:/i.test(target)) continue // http(s), mailto: not checked here
    const [file, anchor] = target.split('#')
    const resolved = file === '' ? page : path.posix.normalize(path.posix.join(path.posix.dirname(page), file))
    if (!fs.existsSync(path.join(root, resolved))) {
      broken.push(`${target}: no file ${resolved}`)
      continue
    }
    if (anchor !== undefined && resolved.endsWith('.md') && !anchors(resolved).has(decodeURIComponent(anchor))) {
      broken.push(`${target}: no heading #${anchor} in ${resolved}`)
    }
  }
  expect(broken).toEqual([])
})

test("headings' ids follow GitHub's rule, and the pages do link to anchors", () => {
  const ids = anchors('docs/locks.md')
  for (const id of ['shared-results-one-run-every-caller-gets-its-value', 'http-idempotency-keys-redis-snatchidempotency', 'shutting-down-sigterm-drain-hand-over']) {
    expect(ids).toContain(id)
  }
  expect(ids).not.toContain('shared-results')
  const anchored = pages.flatMap((page) => [...prose(page).matchAll(/\]\([^)]*#[^)]+\)/g)])
  expect(anchored.length).toBeGreaterThan(5)
})
