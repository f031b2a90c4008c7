'use strict'
// The README's examples against the package's types: every ```js and ```ts block of README.md and docs/*.md is
// type-checked (strict TypeScript, as an ES module: `require` of a package becomes its import), unless the line
// before it is `<!-- fragment -->`. The names an example takes from its surroundings (your app, your database, a
// job) are declared in one prelude; redis-snatch's own names come from its types, so a changed API fails here.

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')
const dir = path.join(root, 'target', 'doc-examples')
const pages = ['README.md', ...fs.readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)]

/** What the examples take from a user's application: declared, not ours to check. */
const PRELUDE = `
import type { Locker } from 'redis-snatch'
declare global {
  const locker: Locker
  const app: any
  const server: { close(): void }
  const fastify: any
  const express: any
  const db: any
  const queue: any
  const job: any
  const month: string
  const from: string
  const to: string
  const qty: number
  const id: string
  const http: typeof import('node:http')
  const createLocker: typeof import('redis-snatch').createLocker
  const histogram: any
  const logger: any
  const upload: any
  const file: any
  const prices: any
  function buildReport(...args: any[]): Promise<unknown>
  function fulfil(...args: any[]): Promise<unknown>
  function createOrder(...args: any[]): unknown
  function sendReport(...args: any[]): Promise<unknown>
  function decrementStock(...args: any[]): Promise<unknown>
  function work(...args: any[]): Promise<unknown>
  function render(...args: any[]): any
  function load(...args: any[]): any
  function save(...args: any[]): any
  function edit(...args: any[]): any
  function requireAdmin(...args: any[]): any
  function mount(...args: any[]): any
  function publish(...args: any[]): any
  function log(...args: any[]): any
}
export {}
`

/** The blocks of `page` to check: `{ line, code }`. */
function examples(page) {
  const lines = fs.readFileSync(path.join(root, page), 'utf8').split('\n')
  const found = []
  for (let i = 0; i < lines.length; i++) {
    if (!/^```(js|ts)\s*$/.test(lines[i])) continue
    const end = lines.indexOf('```', i + 1)
    if (lines[i - 1]?.trim() !== '<!-- fragment -->') found.push({ line: i + 1, code: lines.slice(i + 1, end).join('\n') })
    i = end
  }
  return found
}

/** `code` as an ES module: `require('x')` of a package as its import. */
function asModule(code) {
  return `${code
    .replace(/^const (\{[^}]*\}) = require\(('[^']+')\)/gm, (_, names, from) => `import ${names.replace(/:\s*/g, ' as ')} from ${from}`)
    .replace(/^const (\w+) = require\(('[^']+')\)/gm, 'import $1 from $2')}\nexport {}\n`
}

test('the examples type-check against the package', () => {
  fs.rmSync(dir, { recursive: true, force: true })
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, 'prelude.d.ts'), PRELUDE)
  const files = []
  for (const page of pages) {
    for (const { line, code } of examples(page)) {
      const file = `${page.replace(/\W/g, '_')}_line${line}.mts`
      fs.writeFileSync(path.join(dir, file), asModule(code))
      files.push(file)
    }
  }
  expect(files.length).toBeGreaterThan(10)
  const tsconfig = {
    compilerOptions: {
      strict: true,
      noImplicitAny: false,
      noEmit: true,
      target: 'ES2022',
      lib: ['ES2022', 'ESNext.Disposable', 'DOM'],
      module: 'node16',
      moduleResolution: 'node16',
      types: ['node'],
      typeRoots: [path.join(root, 'node_modules', '@types')],
    },
    files: ['prelude.d.ts', ...files],
  }
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(tsconfig))
  let output = ''
  try {
    execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', dir], { encoding: 'utf8' })
  } catch (err) {
    output = err.stdout || String(err)
  }
  expect(output).toBe('')
})
