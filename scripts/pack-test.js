'use strict'
// `npm run test:pack`, also the last step of `npm test`: what `npm install redis-snatch` gives a user on this host.
// Checks npm/<platform>/ against napi.targets and lib/binding.js, packs the main package and this host's platform
// package (with the built .node) into a temp dir, installs both tarballs into an empty project there whose PATH has
// no Rust toolchain, then requires it (CJS), imports it (ESM), runs one snatchTask against REDIS_URL (else a
// throwaway redis-server), checks that TypeScript resolves every subpath of `exports` to its types under node10,
// node16, nodenext and bundler resolution (CommonJS and ES modules) and type-checks a strict TypeScript usage under
// each, and follows every relative link of the installed README and guides to a file of the installed package.
// Checks the .node's size last. Exits non-zero on the first failed check; removes what it made.

const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { parseTriple } = require('@napi-rs/cli')
const ts = require('typescript')
const { redisFromEnv } = require('../__test__/support/redis-server')
const { hostPlatform, platformOf } = require('../lib/platform')

const root = path.join(__dirname, '..')
const fixtures = path.join(__dirname, 'pack-fixture')
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
const tsc = path.join(path.dirname(require.resolve('typescript/package.json')), 'bin', 'tsc')
// A TypeScript user of a Node package has @types/node (index.d.ts refers to node:events); the temp project uses ours.
const typeRoots = [path.join(root, 'node_modules', '@types')]
// 4 MiB until 0.2, which added TLS (rustls with ring) and the Redis Cluster client: about 1 MiB more; 6 MiB until 0.4,
// whose shutdown, hand-over and sets of keys took it 10 KB past that; 6.5 MiB until stored schedules (their core
// module, machines and ten scripts) and the servers' own release commands added 320 KB (6.25 to 6.56 MiB); 7 MiB until
// the build for speed (`opt-level` 3: 5-10 % more throughput at c=50; bench/README.md, step 29) took it to 7.18 MiB,
// chrono-tz's relocated tables gone at the same time (8.68 MiB with them).
const MAX_ADDON_BYTES = 7.5 * 1024 * 1024
// The main tarball, packed: in 0.4 about 95 KB of code and types, 45 KB of guides (docs/*.md, CONTRIBUTING.md: what
// the README links to) and the two screenshots the guides show (docs/*.png, 300 KB, which do not compress).
const MAX_MAIN_PACKED_BYTES = 512 * 1024
const COMMAND_TIMEOUT_MS = 60_000

/** Print a passed check. */
function ok(message) {
  console.log(`ok - ${message}`)
}

/** `bytes` for humans. */
function formatSize(bytes) {
  return `${bytes} bytes (${(bytes / 1024 / 1024).toFixed(2)} MiB)`
}

/** Run a command (printed first) and return its stdout; throw with its output if it fails. */
function run(command, args, options) {
  console.log(`$ ${[command, ...args].join(' ')}`)
  const result = spawnSync(command, args, { encoding: 'utf8', timeout: COMMAND_TIMEOUT_MS, ...options })
  if (result.error) throw result.error
  if (result.status !== 0) {
    throw new Error(`${command} failed (${result.status ?? result.signal}):\n${result.stdout}${result.stderr}`)
  }
  return result.stdout
}

/** npm/<platform>/ has one package per napi target, at the root's version, named as lib/binding.js requires it. */
function checkPlatformPackages() {
  const binding = fs.readFileSync(path.join(root, 'lib', 'binding.js'), 'utf8')
  const platforms = pkg.napi.targets.map((triple) => parseTriple(triple).platformArchABI).sort()
  assert.deepEqual(pkg.napi.targets.map(platformOf).sort(), platforms, "lib/platform.js names the platforms as napi-rs does")
  assert.deepEqual(fs.readdirSync(path.join(root, 'npm')).sort(), platforms, 'npm/ (napi create-npm-dirs)')
  for (const platform of platforms) {
    const manifest = JSON.parse(fs.readFileSync(path.join(root, 'npm', platform, 'package.json'), 'utf8'))
    const addon = `${pkg.napi.binaryName}.${platform}.node`
    assert.equal(manifest.name, `${pkg.name}-${platform}`)
    assert.equal(manifest.version, pkg.version, `npm/${platform}/package.json version (napi version)`)
    assert.equal(manifest.main, addon)
    assert.deepEqual(manifest.files, [addon])
    assert.ok(binding.includes(`require('${manifest.name}')`), `binding.js does not load ${manifest.name}`)
    assert.ok(binding.includes(`require('./${addon}')`), `binding.js does not load ./${addon}`)
  }
  ok(`npm/ has a package for each of the ${platforms.length} napi targets at ${pkg.version}, as binding.js names them`)
}

/** The path of the built .node for `platform` (beside lib/binding.js, which loads it). */
function builtAddon(platform) {
  const file = path.join(root, 'lib', `${pkg.napi.binaryName}.${platform}.node`)
  assert.ok(fs.existsSync(file), `${path.basename(file)} is missing: run \`npm run build\` first`)
  return file
}

/** The .node is at most MAX_ADDON_BYTES. */
function checkAddonSize(addon) {
  const { size } = fs.statSync(addon)
  const limit = formatSize(MAX_ADDON_BYTES)
  assert.ok(size <= MAX_ADDON_BYTES, `${path.basename(addon)} is ${formatSize(size)}, over the limit of ${limit}`)
  ok(`${path.basename(addon)} is ${formatSize(size)}, within ${limit}`)
}

/** A PATH of node's own directory, /usr/bin and /bin, after checking that it has no cargo or rustc. */
function toolchainFreePath() {
  const dirs = [...new Set([path.dirname(process.execPath), '/usr/bin', '/bin'])]
  for (const tool of ['cargo', 'rustc']) {
    const dir = dirs.find((candidate) => fs.existsSync(path.join(candidate, tool)))
    assert.equal(dir, undefined, `${tool} is in ${dir}, a directory the temp project's PATH needs`)
  }
  ok(`no cargo or rustc on the temp project's PATH (${dirs.join(path.delimiter)})`)
  return dirs.join(path.delimiter)
}

/**
 * The environment of every command: `PATH`, `extra`, and none of the npm_* variables of an enclosing `npm test`
 * (npm_config_local_prefix would point a nested `npm install` back at this repository).
 */
function commandEnv(PATH, extra = {}) {
  const inherited = Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name))
  return { ...Object.fromEntries(inherited), PATH, ...extra }
}

/** `npm pack` the package in `dir` into `dest`; npm's report of it (filename, size, files). */
function pack(dir, dest, env) {
  const [report] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', dest], { cwd: dir, env }))
  return report
}

/** What npm ships whatever `files` says. */
const ALWAYS_PACKED = ['package.json', 'README.md', 'LICENSE']

/** Whether `file` is what the `files` entry `entry` names: a folder (`dir/`), `dir/*.ext`, or the file itself. */
function matches(entry, file) {
  if (entry.endsWith('/')) return file.startsWith(entry)
  const star = entry.indexOf('*')
  if (star === -1) return file === entry
  const [before, after] = [entry.slice(0, star), entry.slice(star + 1)]
  return file.startsWith(before) && file.endsWith(after) && !file.slice(before.length, -after.length).includes('/')
}

/**
 * The main tarball holds what `files` lists (plus what npm always ships), and no .node (`files` leaves out the one
 * built beside lib/binding.js with a `!` entry: the platform packages ship it); at most MAX_MAIN_PACKED_BYTES.
 */
function checkMainTarball(report) {
  const packed = report.files.map((file) => file.path)
  const included = pkg.files.filter((entry) => !entry.startsWith('!'))
  const unexpected = packed.filter((file) => !included.some((entry) => matches(entry, file)) && !ALWAYS_PACKED.includes(file))
  assert.deepEqual(unexpected, [], 'files the main tarball should not ship')
  const missing = included.filter((entry) => !packed.some((file) => matches(entry, file)))
  assert.deepEqual(missing, [], '`files` entries missing from the main tarball')
  assert.deepEqual(packed.filter((file) => file.endsWith('.node')), [], 'a .node in the main tarball')
  const limit = formatSize(MAX_MAIN_PACKED_BYTES)
  assert.ok(report.size <= MAX_MAIN_PACKED_BYTES, `${report.filename} is ${formatSize(report.size)} packed, over the limit of ${limit}`)
  ok(`${report.filename}: ${formatSize(report.size)} (within ${limit}), ${packed.length} files, all from \`files\`, no .node`)
}

/**
 * Every relative link (and image) of the installed README.md and docs/*.md, outside code, names a file of the
 * installed package at `dir`: what a user reads in node_modules leads somewhere (the anchors: docs/links.test.js).
 */
function checkInstalledLinks(dir) {
  const pages = ['README.md', ...fs.readdirSync(path.join(dir, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)]
  const broken = []
  let links = 0
  for (const page of pages) {
    const prose = fs.readFileSync(path.join(dir, page), 'utf8').replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '')
    for (const [, target] of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const file = target.split('#')[0]
      if (/^[a-z]+:/i.test(target) || file === '') continue // a URL, or an anchor in the page itself
      links++
      const resolved = path.resolve(dir, path.dirname(page), decodeURIComponent(file))
      if (!resolved.startsWith(dir + path.sep) || !fs.existsSync(resolved)) broken.push(`${page}: ${target}`)
    }
  }
  assert.deepEqual(broken, [], 'links of the installed README and guides to no file of the installed package')
  ok(`the ${links} relative links of the installed README.md and docs/*.md (${pages.length} pages) name files of the package`)
}

/**
 * Pack the main package and npm/<platform>/ (with `addon` copied in, and removed again unless it was there before)
 * into `dest`; the two tarballs' paths.
 */
function packTarballs(platform, addon, dest, env) {
  const platformDir = path.join(root, 'npm', platform)
  const copy = path.join(platformDir, path.basename(addon))
  const existed = fs.existsSync(copy)
  fs.copyFileSync(addon, copy)
  try {
    const main = pack(root, dest, env)
    checkMainTarball(main)
    const native = pack(platformDir, dest, env)
    assert.ok(native.files.some((file) => file.path === path.basename(addon)), `${native.filename} lacks the .node`)
    ok(`${native.filename}: ${formatSize(native.size)} (the .node unpacked: ${formatSize(native.unpackedSize)})`)
    checkStatedSizes(native)
    return [main, native].map((report) => path.join(dest, report.filename))
  } finally {
    if (!existed) fs.rmSync(copy, { force: true })
  }
}

/** The install guide's sizes of the platform package ("about X MB packed, Y MB installed") are within 10% of `native`'s. */
function checkStatedSizes(native) {
  const page = 'docs/install.md'
  const stated = /about ([\d.]+) MB packed, ([\d.]+) MB installed/.exec(fs.readFileSync(path.join(root, page), 'utf8'))
  assert.ok(stated, `${page} states the platform package's sizes as 'about X MB packed, Y MB installed'`)
  for (const [label, mb, bytes] of [['packed', stated[1], native.size], ['installed', stated[2], native.unpackedSize]]) {
    const measured = bytes / 1e6
    assert.ok(Math.abs(Number(mb) - measured) <= measured * 0.1, `${page} says ${mb} MB ${label}; measured ${measured.toFixed(2)} MB`)
  }
  ok(`${page}'s sizes of the platform package (${stated[1]} MB packed, ${stated[2]} MB installed) are within 10%`)
}

/** One version everywhere: package.json's is the CHANGELOG's newest (npm/*: checkPlatformPackages). */
function checkVersions() {
  const newest = /^## (\d+\.\d+\.\d+\S*)/m.exec(fs.readFileSync(path.join(root, 'CHANGELOG.md'), 'utf8'))
  assert.equal(newest?.[1], pkg.version, "CHANGELOG.md's newest version is package.json's")
  ok(`package.json, CHANGELOG.md and npm/*/package.json are at ${pkg.version}`)
}

/**
 * Without the platform package, loading the package fails with ERR_SNATCH_NATIVE whose first line names that package
 * and the command that installs it.
 */
function checkMissingPlatformPackage(project, platform, env) {
  const installed = path.join(project, 'node_modules', `${pkg.name}-${platform}`)
  const aside = `${installed}.aside`
  fs.renameSync(installed, aside)
  try {
    const script = "try { require('redis-snatch') } catch (e) { console.log(e.code + '\\n' + e.message.split('\\n')[0]) }"
    const [code, first] = run('node', ['-e', script], { cwd: project, env }).trim().split('\n')
    const name = `${pkg.name}-${platform}`
    assert.equal(code, 'ERR_SNATCH_NATIVE')
    const expected = `redis-snatch: ${name}, the native module for this platform, is not installed: run \`npm install ${name}@${pkg.version}\``
    assert.ok(first.startsWith(expected), `the first line says which package is missing, got: ${first}`)
    ok(`without ${name}: ERR_SNATCH_NATIVE, naming it and \`npm install ${name}@${pkg.version}\` first`)
  } finally {
    fs.renameSync(aside, installed)
  }
}

/** What the declaration file `dts` exports, read with the TypeScript compiler: all names, and those of values. */
function declaredExports(dts) {
  const program = ts.createProgram([dts], { noEmit: true, typeRoots, types: ['node'] })
  const checker = program.getTypeChecker()
  const exported = checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(dts)))
  const names = (symbols) => symbols.map((symbol) => symbol.name).sort()
  return { all: names(exported), values: names(exported.filter((symbol) => symbol.flags & ts.SymbolFlags.Value)) }
}

/** The names the usage fixture imports from 'redis-snatch'. */
function usedNames() {
  const file = path.join(fixtures, 'usage.ts')
  const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest)
  const imports = source.statements.filter(
    (node) => ts.isImportDeclaration(node) && node.moduleSpecifier.text === 'redis-snatch',
  )
  return imports.flatMap((node) => node.importClause.namedBindings.elements.map((element) => element.name.text)).sort()
}

/**
 * TypeScript's resolution from a file of the installed project: the moduleResolution, its module setting, and the
 * resolution modes it has (node10: CommonJS only, the others `require` and `import`).
 */
const RESOLUTIONS = [
  ['node10', 'commonjs', [undefined]],
  ['node16', 'node16', [ts.ModuleKind.CommonJS, ts.ModuleKind.ESNext]],
  ['nodenext', 'nodenext', [ts.ModuleKind.CommonJS, ts.ModuleKind.ESNext]],
  ['bundler', 'preserve', [ts.ModuleKind.CommonJS, ts.ModuleKind.ESNext]],
]

/**
 * The declarations (relative to the package) that `subpath` of `exports` must resolve to under `moduleResolution` and
 * `mode`: node10 has no `exports` (`types` for the main entry, else `typesVersions`).
 */
function expectedTypes(subpath, moduleResolution, mode) {
  if (moduleResolution === 'node10') return subpath === '.' ? pkg.types : pkg.typesVersions['*'][subpath.slice(2)]?.[0]
  return pkg.exports[subpath][mode === ts.ModuleKind.ESNext ? 'import' : 'require'].types
}

/**
 * Every subpath of `exports` resolves with TypeScript's own resolver, from the installed project, to its
 * declarations under each moduleResolution and mode of RESOLUTIONS.
 */
function checkTypeResolution(project) {
  const installed = path.join(project, 'node_modules', pkg.name)
  const from = path.join(project, 'resolve-from.ts')
  const subpaths = Object.keys(pkg.exports).filter((subpath) => subpath !== './package.json')
  for (const [moduleResolution, module, modes] of RESOLUTIONS) {
    const { options } = ts.convertCompilerOptionsFromJson({ moduleResolution, module }, project)
    for (const mode of modes) {
      const condition = mode === undefined ? '' : mode === ts.ModuleKind.ESNext ? ' (import)' : ' (require)'
      const how = `${moduleResolution}${condition}`
      for (const subpath of subpaths) {
        const specifier = subpath === '.' ? pkg.name : `${pkg.name}${subpath.slice(1)}`
        const { resolvedModule } = ts.resolveModuleName(specifier, from, options, ts.sys, undefined, undefined, mode)
        const expected = expectedTypes(subpath, moduleResolution, mode)
        assert.ok(expected, `package.json names no declarations for ${specifier} under ${how}`)
        assert.equal(resolvedModule?.resolvedFileName, path.join(installed, expected), `${specifier} under ${how}`)
      }
    }
  }
  const modes = RESOLUTIONS.map(([name, , list]) => `${name}${list.length > 1 ? ' (require, import)' : ''}`)
  ok(`TypeScript resolves each of the ${subpaths.length} entries of \`exports\` to its types under ${modes.join(', ')}`)
}

/** Type-check `files` of `project` (strict, with Node's types) with this repo's TypeScript under `compilerOptions`. */
function typecheck(project, env, name, compilerOptions, files) {
  const lib = ['ES2022', 'ESNext.Disposable']
  const base = { strict: true, noEmit: true, target: 'ES2022', lib, typeRoots, types: ['node'], skipLibCheck: false }
  const config = { compilerOptions: { ...base, ...compilerOptions }, files }
  fs.writeFileSync(path.join(project, `tsconfig.${name}.json`), JSON.stringify(config, null, 2))
  run(process.execPath, [tsc, '-p', `tsconfig.${name}.json`], { cwd: project, env })
  ok(`tsc --strict, ${name} resolution: ${files.join(', ')} type-check against the installed types`)
}

/** Install the tarballs into a fresh project under `temp` and check it as a user would. */
async function checkInstalled(temp, tarballs, platform, env) {
  const project = path.join(temp, 'project')
  fs.mkdirSync(project)
  fs.writeFileSync(path.join(project, 'package.json'), '{ "name": "pack-test-project", "private": true }\n')
  // --offline with an empty cache: nothing may come from a registry, only the two tarballs.
  const cache = path.join(temp, 'npm-cache')
  run('npm', ['install', '--no-audit', '--no-fund', '--offline', '--cache', cache, ...tarballs], { cwd: project, env })
  ok(`installed ${tarballs.map((file) => path.basename(file)).join(' and ')} into an empty project, offline`)

  for (const file of ['smoke.cjs', 'smoke.mjs', 'default-import.mts']) {
    fs.copyFileSync(path.join(fixtures, file), path.join(project, file))
  }
  for (const file of ['usage.mts', 'usage.cts', 'usage.ts']) {
    fs.copyFileSync(path.join(fixtures, 'usage.ts'), path.join(project, file))
  }
  const exported = declaredExports(path.join(project, 'node_modules', 'redis-snatch', 'index.d.ts'))
  assert.deepEqual(usedNames(), exported.all, 'scripts/pack-fixture/usage.ts must import every name index.d.ts exports')
  ok(`the TypeScript usage imports all ${exported.all.length} names the installed index.d.ts exports`)
  const declared = JSON.stringify(exported.values)
  // The values each subpath's types declare, for the ES module entries of those that need no peer dependency.
  const subpaths = ['./dashboard', './prometheus', './idempotency'].map((subpath) => {
    const dts = path.join(project, 'node_modules', pkg.name, pkg.exports[subpath].require.types)
    return [subpath, declaredExports(dts).values]
  })

  process.stdout.write(run('node', ['smoke.cjs', platform, declared], { cwd: project, env }))
  ok('require(): CommonJS entry')
  checkMissingPlatformPackage(project, platform, env)
  const bin = path.join(project, 'node_modules', '.bin', 'redis-snatch')
  assert.match(run(bin, ['--help'], { cwd: project, env }), /^usage: redis-snatch /, 'the command line answers --help')
  assert.equal(run(bin, ['--version'], { cwd: project, env }), `${pkg.version}\n`, 'the command line answers --version')
  ok(`the command line: node_modules/.bin/redis-snatch --help, and --version (${pkg.version})`)
  checkInstalledLinks(path.join(project, 'node_modules', 'redis-snatch'))

  const server = await redisFromEnv()
  try {
    const withRedis = { ...env, REDIS_URL: server.url }
    process.stdout.write(run('node', ['smoke.mjs', declared, JSON.stringify(Object.fromEntries(subpaths))], {
      cwd: project,
      env: withRedis,
    }))
    ok('import: ES module entry, and a real snatchTask')
  } finally {
    await server.stop()
  }

  checkTypeResolution(project)
  typecheck(project, env, 'node10', { module: 'commonjs', moduleResolution: 'node10' }, ['usage.ts'])
  const both = ['usage.mts', 'usage.cts', 'default-import.mts']
  typecheck(project, env, 'node16', { module: 'node16', moduleResolution: 'node16' }, both)
  typecheck(project, env, 'nodenext', { module: 'nodenext', moduleResolution: 'nodenext' }, both)
  typecheck(project, env, 'bundler', { module: 'preserve', moduleResolution: 'bundler' }, both)
}

/** Every check, in order; the temp dir is removed whatever happens. */
async function main() {
  const started = Date.now()
  checkPlatformPackages()
  checkVersions()
  const platform = hostPlatform()
  const addon = builtAddon(platform)
  const env = commandEnv(toolchainFreePath())
  const temp = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-snatch-pack-'))
  try {
    const tarballs = packTarballs(platform, addon, temp, env)
    await checkInstalled(temp, tarballs, platform, env)
  } finally {
    fs.rmSync(temp, { recursive: true, force: true })
  }
  checkAddonSize(addon)
  console.log(`\npack test passed in ${((Date.now() - started) / 1000).toFixed(1)} s`)
}

main().catch((err) => {
  console.error(`\nnot ok - ${err.message}`)
  process.exitCode = 1
})
