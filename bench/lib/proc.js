'use strict'
// CPU time of other processes (the redis-server, or a cluster's) from /proc/<pid>/stat, for Linux.

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')

let ticksPerSecond = null

/** Clock ticks per second of /proc/<pid>/stat times (`getconf CLK_TCK`, 100 if that fails). */
function clockTicks() {
  if (ticksPerSecond === null) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' })) || 100
    } catch {
      ticksPerSecond = 100
    }
  }
  return ticksPerSecond
}

/**
 * User + system CPU seconds used so far by `pid`, or summed over an array of pids (a cluster's nodes); NaN if one
 * cannot be read (no pid, not Linux, gone).
 */
function cpuSeconds(pid) {
  if (Array.isArray(pid)) return pid.length ? pid.reduce((sum, one) => sum + cpuSeconds(one), 0) : NaN
  if (!pid) return NaN
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15 of the whole line.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) / clockTicks()
  } catch {
    return NaN
  }
}

module.exports = { cpuSeconds }
