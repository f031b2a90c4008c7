'use strict'
// ARCHITECTURE.md cannot drift: every file it names exists, and every name of the code it gives (a type, a function, a
// variant; `Type::name` too) is in the sources. Code spans that are neither (commands, examples, patterns) are left
// alone. Its "Layout" names every entry of the root and every folder of __test__, and each test file is in one.

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..', '..')
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
const text = fs.readFileSync(path.join(root, 'ARCHITECTURE.md'), 'utf8')
const spans = [...text.matchAll(/`([^`\n]+)`/g)].map((m) => m[1])

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
    const found = files.some((file) => file === name || file.endsWith(`/${name}`) || file === `${name}/`)
    return !found && !fs.existsSync(path.join(root, name)) // a folder the listing skips (.ci/) is there too
  })
  expect(missing).toEqual([])
})

test('every name of the code ARCHITECTURE.md gives is in the sources', () => {
  const names = spans.filter((span) => /^[A-Za-z_]\w*(::[A-Za-z_]\w*)*$/.test(span))
  expect(names.length).toBeGreaterThan(50)
  expect(names.filter((name) => !inSources(name.split('::')))).toEqual([])
})

/** The code spans of the first column of each table of the "Layout" section, a list per table. */
function layoutTables() {
  const section = text.slice(text.indexOf('\n## Layout\n')).split(/\n## (?!Layout\n)/)[0]
  const tables = section
    .split(/\n(?!\|)/)
    .map((block) => block.trim())
    .filter((block) => block.startsWith('|'))
  return tables.map((table) =>
    table
      .split('\n')
      .slice(2) // the header and the line under it
      .flatMap((row) => [...row.split('|')[1].matchAll(/`([^`]+)`/g)].map((m) => m[1])),
  )
}

/** The files in the repository: git's, else (not a git checkout) those on disk. */
function repositoryFiles() {
  try {
    return execFileSync('git', ['ls-files'], { cwd: root, encoding: 'utf8' }).split('\n').filter(Boolean)
  } catch {
    return files.filter((file) => !file.endsWith('/'))
  }
}

test('the root and the test folders are as the "Layout" of ARCHITECTURE.md draws them', () => {
  const [rootEntries, testFolders] = layoutTables()
  const repository = repositoryFiles()
  const top = [...new Set(repository.map((file) => file.replace(/\/.*$/, '/')))]
  expect(top.filter((entry) => !rootEntries.includes(entry))).toEqual([]) // a new root entry: in a folder, or named
  expect(rootEntries.filter((entry) => !top.includes(entry))).toEqual([])
  // A file right in __test__/, or a folder the table does not name.
  const tests = repository.filter((file) => file.startsWith('__test__/'))
  const underTests = [...new Set(tests.map((file) => file.split('/').slice(0, 2).join('/')))]
  expect(underTests.filter((entry) => !testFolders.includes(`${entry}/`))).toEqual([])
  // A test file is right in a folder of tests, not in support/ nor deeper.
  const misplaced = repository
    .filter((file) => file.endsWith('.test.js'))
    .filter((file) => !testFolders.includes(`${path.posix.dirname(file)}/`) || file.startsWith('__test__/support/'))
  expect(misplaced).toEqual([])
})
test('each concern lives where ARCHITECTURE.md says: the names a row of its table gives are in the files it names', () => {
  const doc = fs.readFileSync(path.join(root, 'ARCHITECTURE.md'), 'utf8')
  const table = doc.slice(doc.indexOf('## Where each concern lives'), doc.indexOf('## Glossary'))
  const rows = table.split('\n').filter((line) => line.startsWith('| ') && !line.startsWith('| concern') && !line.startsWith('|---'))
  expect(rows.length).toBeGreaterThan(30)
  const misplaced = []
  for (const row of rows) {
    const [concern, where] = row.slice(2, -2).split(' | ')
    const codes = (cell) => [...cell.matchAll(/`([^`\n]+)`/g)].map((m) => m[1])
    // The files and folders of the row (a bare name is taken as the end of a path: `schedule/cron.rs`, `runner.rs`).
    const places = codes(where).filter((span) => /^[\w./*-]+$/.test(span) && (EXTENSION.test(span) || span.endsWith('/')))
    const ofRow = sources.filter((file) =>
      places.some((place) => {
        const name = place.replace(/^\.\//, '').replace(/\*/g, '')
        return place.endsWith('/') ? file.startsWith(name) : file === name || file.endsWith(`/${name}`) || (place.includes('*') && file.includes(name.split('.')[0]))
      }),
    )
    const textOf = ofRow.map((file) => fs.readFileSync(path.join(root, file), 'utf8'))
    const names = [...codes(concern), ...codes(where)].filter((span) => /^[A-Za-z_]\w*(::[A-Za-z_]\w*)*$/.test(span))
    for (const name of names) {
      const words = name.split('::').map((word) => new RegExp(`\\b${word}\\b`))
      if (!textOf.some((text) => words.every((word) => word.test(text)))) misplaced.push(`${name} (not in ${places.join(', ')})`)
    }
  }
  expect(misplaced).toEqual([])
})

test('the facade writes no limit or default of the core: it takes each from the binding (LIMITS)', () => {
  const { LIMITS } = require('../../lib/native')
  const values = new Set(Object.values(LIMITS).filter((v) => typeof v === 'number'))
  const facade = files.filter((file) => /^(lib|bin)\/.*\.js$/.test(file) && !file.startsWith('lib/dashboard/page/'))
  const copies = []
  for (const file of facade) {
    const text = fs.readFileSync(path.join(root, file), 'utf8')
    // A limit or default of its own with a number of the core's, or the longest duration written out.
    for (const [, name, expression] of text.matchAll(/const ((?:MAX|MIN|DEFAULT)_[A-Z_]*) = ([\d_ *+-]+)\n/g)) {
      const value = Function(`return (${expression.replace(/_/g, '')})`)()
      if (values.has(value)) copies.push(`${file}: ${name} = ${expression.trim()}`)
    }
    for (const [literal] of text.matchAll(/2 \*\* 31 - 1|2147483647|2 \*\* 32 - 1/g)) copies.push(`${file}: ${literal}`)
  }
  expect(copies).toEqual([])
})
