'use strict'
// `npm run fuzz [-- --seconds N]`: fuzzes the direct connection's RESP parser, writer and reply pairing for about N
// seconds (60 by default), in two ways:
// - the property tests of crates/protocol/tests/fuzz_resp.rs (stable Rust, as `npm test` runs them briefly): built
//   (release; not counted in the time), then run again and again, each run with the next seed (PROPTEST_RNG_SEED,
//   from a random start) and more cases per property (PROPTEST_CASES) than the last, as many as their share of the
//   time holds;
// - the cargo-fuzz targets of crates/protocol/fuzz (libFuzzer, coverage-guided; `cargo +nightly fuzz run`), each for its
//   share of the time, from its corpus (crates/protocol/fuzz/corpus, kept between runs) and the seeds committed beside it.
//   They need a nightly toolchain and cargo-fuzz (`rustup toolchain install nightly`, `cargo install cargo-fuzz`);
//   without them the property tests get all the time, and this says so.
// Prints each run and the cases in all. Stops at the first failure, with the output and the command that runs it
// again, and exits non-zero.

const { spawnSync } = require('node:child_process')
const { randomInt } = require('node:crypto')
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')
const protocol = path.join(root, 'crates', 'protocol')
/** The cargo-fuzz targets (crates/protocol/fuzz/fuzz_targets), and libFuzzer's options for every run: a reply's
 *  declared length must not make the parser allocate it. */
const FUZZ_TARGETS = ['parse_reply', 'reply_pairing']
const LIBFUZZER_OPTIONS = ['-malloc_limit_mb=64', '-rss_limit_mb=2048']
const CARGO_ARGS = ['test', '-p', 'snatch-protocol', '--release', '--test', 'fuzz_resp']
// Cases per property of the first run (about half a second), and the fewest worth a run.
const FIRST_CASES = 5_000
const MIN_CASES = 1_000
// A run may take this many times what the runs before it predict before it counts as hung.
const HUNG_FACTOR = 5

/** The `--seconds N` of the command line (60 if absent); exits with a message when it is not a positive number. */
function seconds(args) {
  const at = args.findIndex((arg) => arg === '--seconds' || arg.startsWith('--seconds='))
  if (at < 0) return 60
  const value = args[at].includes('=') ? args[at].split('=')[1] : args[at + 1]
  const n = Number(value)
  if (!Number.isFinite(n) || n <= 0) {
    console.error(`--seconds wants a positive number of seconds, not ${value}`)
    process.exit(2)
  }
  return n
}

/** Builds the tests with inherited output; exits with cargo's status if it fails. */
function build() {
  console.log(`== build: cargo ${[...CARGO_ARGS, '--no-run'].join(' ')}`)
  const result = spawnSync('cargo', [...CARGO_ARGS, '--no-run'], { cwd: root, stdio: 'inherit' })
  if (result.error) throw result.error
  if (result.status !== 0) process.exit(result.status ?? 1)
}

/**
 * Runs the tests once, `cases` cases per property from `seed`, killed after `timeoutMs`: whether they passed, and
 * their output.
 */
function run(cases, seed, timeoutMs) {
  const env = { ...process.env, PROPTEST_CASES: String(cases), PROPTEST_RNG_SEED: String(seed) }
  const result = spawnSync('cargo', CARGO_ARGS, {
    cwd: root,
    env,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    timeout: timeoutMs,
  })
  const output = `${result.stdout ?? ''}${result.stderr ?? ''}`
  if (result.error?.code === 'ETIMEDOUT') {
    return { passed: false, output: `${output}\nhung: killed after ${timeoutMs} ms` }
  }
  if (result.error) throw result.error
  return { passed: result.status === 0, output }
}

/** Whether `cargo +nightly fuzz` runs here. */
function cargoFuzzAvailable() {
  const result = spawnSync('cargo', ['+nightly', 'fuzz', '--version'], { cwd: protocol, encoding: 'utf8' })
  return !result.error && result.status === 0
}

/** Runs the property tests until `budgetMs` is used up or a run fails (see the top of the file). */
function propertyTests(budgetMs) {
  build()
  const started = Date.now()
  const firstSeed = randomInt(2 ** 47)
  let [runs, total, cases, msPerCase] = [0, 0, FIRST_CASES, 0]
  while (cases >= MIN_CASES) {
    const seed = firstSeed + runs
    const expectedMs = msPerCase * cases
    const runStarted = Date.now()
    const { passed, output } = run(cases, seed, Math.max(60_000, Math.ceil(HUNG_FACTOR * expectedMs)))
    const tookMs = Date.now() - runStarted
    runs += 1
    const outcome = passed ? 'ok' : 'FAILED'
    console.log(`run ${runs}: seed ${seed}, ${cases} cases per property, ${(tookMs / 1000).toFixed(1)} s: ${outcome}`)
    if (!passed) {
      console.log(output)
      console.log(`again: PROPTEST_RNG_SEED=${seed} PROPTEST_CASES=${cases} cargo ${CARGO_ARGS.join(' ')}`)
      process.exit(1)
    }
    total += cases
    msPerCase = (Date.now() - started) / total
    const leftMs = budgetMs - (Date.now() - started)
    cases = Math.min(2 * cases, Math.floor(leftMs / msPerCase))
  }
  const tookS = ((Date.now() - started) / 1000).toFixed(1)
  console.log(`== property tests: ${runs} runs, ${total} cases per property in all, ${tookS} s: no failure`)
}

/** Runs cargo-fuzz target `target` for `seconds`, with inherited output; exits with its status if it finds a failure
 *  (libFuzzer prints the input it saved and how to run it again). */
function cargoFuzz(target, seconds) {
  const args = ['+nightly', 'fuzz', 'run', target, `fuzz/corpus/${target}`]
  if (fs.existsSync(path.join(protocol, 'fuzz', 'seeds', target))) args.push(`fuzz/seeds/${target}`)
  args.push('--', `-max_total_time=${seconds}`, ...LIBFUZZER_OPTIONS)
  console.log(`\n== cargo-fuzz ${target}, ${seconds} s: cargo ${args.join(' ')} (in crates/protocol)`)
  fs.mkdirSync(path.join(protocol, 'fuzz', 'corpus', target), { recursive: true })
  const result = spawnSync('cargo', args, { cwd: protocol, stdio: 'inherit' })
  if (result.error) throw result.error
  if (result.status !== 0) {
    console.log(`cargo-fuzz ${target} FAILED`)
    process.exit(result.status ?? 1)
  }
}

function main() {
  const budgetMs = seconds(process.argv.slice(2)) * 1000
  if (!cargoFuzzAvailable()) {
    console.log('== cargo +nightly fuzz is not available here (rustup toolchain install nightly; cargo install cargo-fuzz): the property tests get all the time')
    propertyTests(budgetMs)
    return
  }
  // Half for the property tests, half for the fuzz targets; each at least a few seconds.
  propertyTests(budgetMs / 2)
  const perTarget = Math.max(5, Math.round(budgetMs / 2 / 1000 / FUZZ_TARGETS.length))
  for (const target of FUZZ_TARGETS) cargoFuzz(target, perTarget)
  console.log(`\n== cargo-fuzz: ${FUZZ_TARGETS.join(', ')}, ${perTarget} s each: no failure`)
}

main()
