'use strict'
// What the one-off benchmark scripts (hotkey, schedules, cluster-wakeups, dashboard) share: their `--name value`
// options, and the report they print (and write to `--out FILE` when given).

const fs = require('node:fs')

const args = process.argv.slice(2)

/** The value given after `name` on the command line, else `fallback`. */
function option(name, fallback) {
  return args.includes(name) ? args[args.indexOf(name) + 1] : fallback
}

/** Prints `report`, and writes it to `--out FILE` too when given. */
function publish(report) {
  console.log(report)
  const out = option('--out')
  if (out) fs.writeFileSync(out, `${report}\n`)
}

module.exports = { option, publish }
