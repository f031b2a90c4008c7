'use strict'

/**
 * The fleet's answers (the native side's JSON: times in epoch ms, fences as strings) as the API has them: Dates,
 * bigints, null for what is not known.
 */

const date = (ms) => (ms === null || ms === undefined ? null : new Date(ms))

/** An attempt's record (index.d.ts `OccurrenceRecord`). */
function occurrenceRecord(r) {
  const record = {
    tick: new Date(r.tick),
    attempt: r.attempt,
    why: r.why,
    manual: r.manual === true,
    instance: r.instance ?? null,
    fence: r.fence === null || r.fence === undefined ? null : BigInt(r.fence),
    started: date(r.started),
    durationMs: r.durationMs ?? null,
    outcome: r.outcome,
  }
  if (r.error !== undefined) record.error = r.error
  if (r.reason !== undefined) record.reason = r.reason
  if (r.retryAt !== undefined) record.retryAt = new Date(r.retryAt)
  return record
}

/** A schedule as replicas registered it (index.d.ts `ScheduleInfo`, with `health`). */
function scheduleInfo(s) {
  return {
    name: s.name,
    cron: s.cron,
    timezone: s.timezone,
    replicas: s.replicas,
    suspended: s.suspended,
    next: date(s.next),
    upcoming: s.upcoming.map((ms) => new Date(ms)),
    running: s.running.map(occurrenceRecord),
    last: s.last ? occurrenceRecord(s.last) : null,
    lastSuccess: date(s.lastSuccess),
    recent: s.recent,
    health: s.health,
  }
}

/** A lock held now. */
function heldLock(l) {
  return { key: l.key, holder: l.holder ?? null, ttl: l.ttl, fence: BigInt(l.fence) }
}

module.exports = { occurrenceRecord, scheduleInfo, heldLock }
