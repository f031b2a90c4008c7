'use strict'
// What a @Cron method of @nestjs/schedule becomes: a `locker.schedule()` of the same cron expression, time zone and
// name, with @SnatchSchedule's options. @Cron's options that a fleet-wide schedule cannot honour are refused, never
// silently changed. @nestjs/schedule keeps its decorators' options as metadata on the method (read here by its keys,
// the same in its versions 6 and 12).

const { invalidArg } = require('../errors')
const { scheduleOptionsOf } = require('./decorators')

const SCHEDULER_TYPE = 'SCHEDULER_TYPE'
const SCHEDULE_CRON_OPTIONS = 'SCHEDULE_CRON_OPTIONS'
/** @nestjs/schedule's SchedulerType: CRON, TIMEOUT, INTERVAL. */
const CRON = 1
const TIMEOUT = 2
const INTERVAL = 3

/** @Cron's options that its schedule honours. */
const HONOURED = ['name', 'timeZone', 'disabled', 'waitForCompletion']
/** @Cron's options that a fleet-wide schedule cannot honour, and what to do instead. */
const REFUSED = {
  utcOffset: "give timeZone instead (an IANA name such as 'Etc/GMT-2')",
  threshold: 'a missed occurrence runs late fleet-wide within @SnatchSchedule({ startingDeadline })',
  unrefTimeout: 'a schedule keeps the process alive, as a timer would',
  initialDelay: 'each occurrence runs on whichever replica is up; start the application later instead',
}

/**
 * The schedule of method `methodName` of `instance` (`{ where, name, cron, options, disabled, method }`), or null
 * when it has no @Cron. `@Interval` and `@Timeout` methods are `{ perReplica: '@Interval' | '@Timeout' }`: they are not
 * ours, and run on every replica where ScheduleModule runs them.
 */
function planOf(instance, methodName) {
  const fn = instance[methodName]
  if (typeof fn !== 'function') return null
  const where = `${instance.constructor.name}.${String(methodName)}`
  const type = Reflect.getMetadata(SCHEDULER_TYPE, fn)
  const ours = scheduleOptionsOf(fn)
  if (type !== CRON) {
    if (ours !== undefined) throw invalidArg(TypeError, `${where} has @SnatchSchedule but no @Cron`)
    if (type === INTERVAL || type === TIMEOUT) return { where, perReplica: type === INTERVAL ? '@Interval' : '@Timeout' }
    return null
  }
  const { cronTime, ...cron } = Reflect.getMetadata(SCHEDULE_CRON_OPTIONS, fn)
  for (const option of Object.keys(cron)) {
    if (Object.hasOwn(REFUSED, option)) {
      throw invalidArg(TypeError, `${where}: @Cron's ${option} has no fleet-wide meaning: ${REFUSED[option]}`)
    }
    if (!HONOURED.includes(option)) {
      throw invalidArg(TypeError, `${where}: @Cron's option '${option}' is unknown to redis-snatch (refused rather than ignored)`)
    }
  }
  if (typeof cronTime !== 'string') {
    throw invalidArg(TypeError, `${where}: @Cron needs a cron expression (a string) to run fleet-wide, got ${cronTime === null ? 'null' : `a ${typeof cronTime}`}`)
  }
  const options = { ...ours }
  if (cron.timeZone !== undefined) {
    if (options.timezone !== undefined) throw invalidArg(TypeError, `${where}: give the time zone once, in @Cron's timeZone`)
    options.timezone = cron.timeZone
  }
  // @nestjs/schedule runs a @Cron without timeZone in the process's own zone: so does its schedule.
  options.timezone ??= Intl.DateTimeFormat().resolvedOptions().timeZone
  if (cron.waitForCompletion !== undefined) {
    if (options.concurrency !== undefined) {
      throw invalidArg(TypeError, `${where}: give @Cron's waitForCompletion or @SnatchSchedule's concurrency, not both`)
    }
    options.concurrency = cron.waitForCompletion ? 'forbid' : 'allow'
  }
  return {
    where,
    name: cron.name ?? where,
    cron: cronTime,
    options,
    disabled: cron.disabled === true,
    method: fn,
  }
}

module.exports = { planOf }
