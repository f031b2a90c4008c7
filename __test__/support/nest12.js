'use strict'
// The NestJS 12 fixture (support/nest12-project: ESM-only @nestjs packages, installed by `npm test`) with this package
// installed into it as a user has it: a copy of what npm would pack, with the built .node (in lib/), so that its
// `@nestjs/*` imports resolve to the fixture's NestJS 12 and not to this repository's NestJS 11.

const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..', '..')
const fixture = path.join(__dirname, 'nest12-project')

/** Copies the package into the fixture's node_modules; the fixture's directory. Throws if it is not installed. */
function nest12Fixture() {
  if (!fs.existsSync(path.join(fixture, 'node_modules', '@nestjs', 'core', 'package.json'))) {
    throw new Error('the NestJS 12 fixture is not installed: run `npm ci --prefix __test__/support/nest12-project` (npm test does)')
  }
  const target = path.join(fixture, 'node_modules', 'redis-snatch')
  fs.rmSync(target, { recursive: true, force: true })
  const { files } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
  // `files` leaves the .node out of lib/ (with a `!` entry); the copy of lib/ keeps it.
  for (const entry of ['package.json', ...files.filter((file) => !file.startsWith('!')).flatMap(expand)]) {
    fs.cpSync(path.join(root, entry), path.join(target, entry), { recursive: true })
  }
  return fixture
}

/** The paths a `files` entry names: itself, or for `dir/*.ext` the files of dir whose names end in `.ext`. */
function expand(entry) {
  const star = entry.indexOf('*')
  if (star === -1) return [entry]
  const dir = entry.slice(0, star)
  const suffix = entry.slice(star + 1)
  return fs.readdirSync(path.join(root, dir)).filter((name) => name.endsWith(suffix)).map((name) => dir + name)
}

module.exports = { nest12Fixture }
