'use strict'
// The NestJS 12 fixture (__test__/nest12: ESM-only @nestjs packages, installed by `npm test`) with this package
// installed into it as a user has it: a copy of what npm would pack, plus the built .node, so that its
// `@nestjs/*` imports resolve to the fixture's NestJS 12 and not to this repository's NestJS 11.

const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..', '..')
const fixture = path.join(root, '__test__', 'nest12')

/** Copies the package into the fixture's node_modules; the fixture's directory. Throws if it is not installed. */
function nest12Fixture() {
  if (!fs.existsSync(path.join(fixture, 'node_modules', '@nestjs', 'core', 'package.json'))) {
    throw new Error('the NestJS 12 fixture is not installed: run `npm ci --prefix __test__/nest12` (npm test does)')
  }
  const target = path.join(fixture, 'node_modules', 'redis-snatch')
  fs.rmSync(target, { recursive: true, force: true })
  const { files } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
  const built = fs.readdirSync(root).filter((name) => /^redis-snatch\..+\.node$/.test(name))
  for (const entry of ['package.json', ...files, ...built]) {
    fs.cpSync(path.join(root, entry), path.join(target, entry), { recursive: true })
  }
  return fixture
}

module.exports = { nest12Fixture }
