'use strict'
// ARCHITECTURE.md cannot drift: every file it names exists, and every name of the code it gives (a type, a function, a
// variant; `Type::name` too) is in the sources. Code spans that are neither (commands, examples, patterns) are left
// alone.

const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')
const SKIP = new Set(['node_modules', 'target', '.git', '.ci', 'corpus', 'artifacts'])
const SOURCE = /\.(rs|js|mjs|ts|lua)$/
/** What a file named in the document ends with. */
const EXTENSION = /\.(rs|js|mjs|ts|lua|md|json|toml|sh|png)$/

/** Every file under `dir` (relative to the root), but for dependencies and build output. */
function filesUnder(dir) {
  return fs.readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    if (SKIP.has(entry.name)) return []
    const relative = path.posix.join(dir, entry.name)
    return entry.isDirectory() ? [relative + '/', ...filesUnder(relative)] : [relative]
  })
}

const files = filesUnder('.').map((file) => file.replace(/^\.\//, ''))
const sources = files.filter((file) => SOURCE.test(file) && !file.startsWith('__test__/'))
const texts = sources.map((file) => fs.readFileSync(path.join(root, file), 'utf8'))
const spans = [...fs.readFileSync(path.join(root, 'ARCHITECTURE.md'), 'utf8').matchAll(/`([^`\n]+)`/g)].map((m) => m[1])

/** Whether `name` is a word of the sources (of one file, for all of `names`). */
function inSources(names) {
  const words = names.map((name) => new RegExp(`\\b${name}\\b`))
  return texts.some((text) => words.every((word) => word.test(text)))
}

test('every file ARCHITECTURE.md names exists', () => {
  // A file by its extension, or a folder (a span ending with '/'); not a package (`@nestjs/core`, `redis-snatch/nest`).
  const paths = spans.filter(
    (span) => /^[\w./-]+$/.test(span) && !span.startsWith('redis-snatch/') && (EXTENSION.test(span) || span.endsWith('/')),
  )
  expect(paths.length).toBeGreaterThan(50)
  const missing = paths.filter((span) => {
    const name = span.replace(/^\.\//, '')
    return !files.some((file) => file === name || file.endsWith(`/${name}`) || file === `${name}/`)
  })
  expect(missing).toEqual([])
})

test('every name of the code ARCHITECTURE.md gives is in the sources', () => {
  const names = spans.filter((span) => /^[A-Za-z_]\w*(::[A-Za-z_]\w*)*$/.test(span))
  expect(names.length).toBeGreaterThan(50)
  expect(names.filter((name) => !inSources(name.split('::')))).toEqual([])
})
