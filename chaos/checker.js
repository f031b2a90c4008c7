'use strict'
// The chaos suite's checks over the critical sections the workers reported (see worker.js): overlapping sections
// of one key (two holders acting at once), fences that do not rise in the order the sections started, and the
// takeover delay after a holder was killed.

/**
 * Overlaps and fence violations among `sections` (`{ key, fence: bigint, enter: bigint, last: bigint }`, times in
 * ns of one monotonic clock). A section acts from `enter` to `last`; two sections of a key overlap when one starts
 * before another's last act. Fences must rise in the order of `enter`.
 */
function check(sections) {
  const byKey = new Map()
  for (const s of sections) {
    if (!byKey.has(s.key)) byKey.set(s.key, [])
    byKey.get(s.key).push(s)
  }
  let overlaps = 0
  let fenceViolations = 0
  const examples = []
  for (const list of byKey.values()) {
    list.sort((a, b) => (a.enter < b.enter ? -1 : a.enter > b.enter ? 1 : 0))
    let reach = null // the section whose last act is the latest so far
    for (let i = 0; i < list.length; i++) {
      const s = list[i]
      if (reach && s.enter <= reach.last) {
        overlaps++
        if (examples.length < 5) examples.push({ key: s.key, first: describe(reach), second: describe(s) })
      }
      if (i > 0 && s.fence <= list[i - 1].fence) fenceViolations++
      if (!reach || s.last > reach.last) reach = s
    }
  }
  return { sections: sections.length, overlaps, fenceViolations, examples }
}

/** A section for a report line. */
function describe(s) {
  return `worker ${s.worker}, fence ${s.fence}, acts ${s.enter}…${s.last} ns`
}

/** For each kill `{ key, t }` of a holder of `key`, the ms until another section of `key` started. */
function takeovers(kills, sections) {
  return kills
    .map(({ key, t }) => {
      const next = sections.filter((s) => s.key === key && s.enter > t).reduce((a, s) => (a && a.enter < s.enter ? a : s), null)
      return next ? Number(next.enter - t) / 1e6 : null
    })
    .filter((ms) => ms !== null)
}

/** The `p`-th percentile (0–100) of `values`, or null when there are none. */
function percentile(values, p) {
  if (values.length === 0) return null
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
}

module.exports = { check, takeovers, percentile }
