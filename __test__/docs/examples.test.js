'use strict'
// The docs' examples against the package's types: every ```js and ```ts block of README.md and docs/*.md is
// type-checked (strict TypeScript) in the module system it is written for, unless the line before it is
// `<!-- fragment -->` (those marked `<!-- run: name -->` are also run, by docs/run.test.js): a block that calls
// `require` as CommonJS (a .cts file, `require` of a package read as its import for the types; top-level `await`
// fails there as it does in node), any other as an ES module (a .mts file); one mixing both fails. The names an
// example takes from its surroundings (your app, your database, a job) are declared in one prelude; redis-snatch's
// own names come from its types, so a changed API fails here.

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const { root, pages, blocks, moduleSystem, asModule } = require('../support/doc-blocks')

const dir = path.join(root, 'target', 'doc-examples')

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
  const pool: import('pg').Pool
  const shop: import('mysql2/promise').Pool
  const fence: bigint
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
  function flushOutbox(...args: any[]): Promise<unknown>
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

test('the examples type-check against the package', () => {
  fs.rmSync(dir, { recursive: true, force: true })
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, 'prelude.d.ts'), PRELUDE)
  const files = []
  const mixed = []
  for (const page of pages) {
    for (const { line, code } of blocks(page).filter((block) => !block.fragment)) {
      let system
      try {
        system = moduleSystem(code)
      } catch (err) {
        mixed.push(`${page}, line ${line}: ${err.message}`)
        continue
      }
      const file = `${page.replace(/\W/g, '_')}_line${line}.${system === 'commonjs' ? 'cts' : 'mts'}`
      fs.writeFileSync(path.join(dir, file), asModule(code))
      files.push(file)
    }
  }
  expect(mixed).toEqual([])
  expect(files.length).toBeGreaterThan(10)
  expect(files.filter((file) => file.endsWith('.cts')).length).toBeGreaterThan(3)
  const tsconfig = {
    compilerOptions: {
      strict: true,
      noImplicitAny: false,
      experimentalDecorators: true, // NestJS's
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
