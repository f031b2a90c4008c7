'use strict'
// The chaos suite's checks over the critical sections the workers reported (see worker.js): overlapping sections
// of one key (two holders acting at once, unless both are a read-write lock's readers), fences that do not rise in
// the order the sections started, and the takeover delay after a holder was killed.

/**
 * Overlaps and fence violations among `sections` (`{ key, fence: bigint, enter: bigint, last: bigint, shared, adopted }`,
 * times in ns of one monotonic clock). A section acts from `enter` to `last`; two sections of a key overlap when one
 * starts before another's last act, unless both are `shared` (readers). Fences must rise in the order of `enter`,
 * except between shared sections (readers that hold at once take their fences in any order): an exclusive section's
 * fence is above every earlier section's, a shared one's above every earlier exclusive one's; an `adopted` one (the
 * rest of a section handed over) keeps its fence, at least every earlier section's. A section cut before its first act
 * (its process stopped after its lock was checked and before fn's first check: a window no lock can close) did nothing
 * under its lock and counts in neither.
 */
function check(sections) {
  const byKey = new Map()
  let unacted = 0
  for (const s of sections) {
    if (s.cut && s.last === s.enter) {
      unacted++
      continue
    }
    if (!byKey.has(s.key)) byKey.set(s.key, [])
    byKey.get(s.key).push(s)
  }
  let overlaps = 0
  let fenceViolations = 0
  const examples = []
  for (const list of byKey.values()) {
    list.sort((a, b) => (a.enter < b.enter ? -1 : a.enter > b.enter ? 1 : 0))
    // The sections whose last act is the latest so far: of all, and of the exclusive ones; the highest fences so far.
    let [reach, reachExclusive, fence, fenceExclusive] = [null, null, null, null]
    for (const s of list) {
      const against = s.shared ? reachExclusive : reach
      if (against && s.enter <= against.last) {
        overlaps++
        if (examples.length < 5) examples.push({ key: s.key, first: describe(against), second: describe(s) })
      }
      const above = s.shared ? fenceExclusive : fence
      // The rest of a section handed over goes on with its fence: the same as the highest so far, not lower.
      if (above !== null && (s.adopted ? s.fence < above : s.fence <= above)) fenceViolations++
      if (!reach || s.last > reach.last) reach = s
      if (fence === null || s.fence > fence) fence = s.fence
      if (!s.shared) {
        if (!reachExclusive || s.last > reachExclusive.last) reachExclusive = s
        if (fenceExclusive === null || s.fence > fenceExclusive) fenceExclusive = s.fence
      }
    }
  }
  return { sections: sections.length, overlaps, fenceViolations, unacted, examples }
}

/** A section for a report line. */
function describe(s) {
  return `worker ${s.worker}${s.shared ? ' (reader)' : ''}, fence ${s.fence}, acts ${s.enter}…${s.last} ns`
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
