'use strict'
// @Cron methods in @nestjs/schedule's SchedulerRegistry, as Nest code reaches them: `getCronJob(name)` and
// `getCronJobs()` find each one's `FleetCronJob`, whose `stop()` and `start()` concern this replica's part only (the
// other replicas go on running the schedule; fleet-wide stays `locker.suspend`/`resume`). A CronJob added at run time
// (`addCronJob` of a job not ours) would run on every replica: it is refused, naming the replacement.

const { invalidArg } = require('../errors')

/** What a runtime `addCronJob` is told to use instead. */
const REPLACEMENT =
  'with redis-snatch/nest a CronJob added at run time would run on every replica. Run it once across the replicas as a ' +
  'stored schedule instead: a handler (@SnatchHandler(handler) on a method, or locker.handle(handler, fn) at start-up) ' +
  'and locker.upsertSchedule(name, { cron, timezone, handler, data }) where you called addCronJob ' +
  '(locker.removeSchedule(name) where you called deleteCronJob); see docs/nestjs.md'

/**
 * A @Cron method's schedule on this replica, in the shape of the `cron` package's CronJob that SchedulerRegistry
 * holds: `cronTime.source`, `isActive` (`running` in cron 3), `start()`, `stop()`, `lastDate()`, `fireOnTick()`, and
 * `task` (the ScheduledTask while it runs here).
 */
class FleetCronJob {
  #locker
  #begin
  #logger
  /** Whether this replica takes part (start() called last, not stop()). */
  #running = false
  /** The stop of the last task under way, which a start() waits for (its name is free once it ended). */
  #stopping = null
  #lastDate = null
  /** @type {import('../schedule').ScheduledTask | null} */
  task = null

  /**
   * The job of schedule `name` (`cron` in `timeZone`) of `locker`; `begin()` schedules it here (returns the
   * ScheduledTask); `logger` tells a start that failed.
   */
  constructor(locker, name, cron, timeZone, begin, logger) {
    this.#locker = locker
    this.name = name
    this.cronTime = { source: cron, timeZone }
    this.#begin = begin
    this.#logger = logger
  }

  /** Whether this replica takes part in the schedule (cron 4's name). */
  get isActive() {
    return this.#running
  }

  /** Whether this replica takes part in the schedule (cron 3's name). */
  get running() {
    return this.#running
  }

  /** This replica takes part again (the schedule runs each occurrence once across the replicas that do). */
  start() {
    if (this.#running) return
    this.#running = true
    const begin = () => {
      if (!this.#running || this.task !== null) return
      try {
        this.task = this.#begin()
        this.task.on('run', ({ tick }) => {
          this.#lastDate = tick
        })
      } catch (err) {
        this.#running = false
        this.#logger.error(`@Cron '${this.name}' could not start: ${err.message}`, err.stack)
      }
    }
    if (this.#stopping === null) begin()
    else this.#stopping.then(begin)
  }

  /**
   * This replica stops taking occurrences (a pod shutting down); the others go on. Resolves once an occurrence
   * running here ended. Fleet-wide: `locker.suspend(name)`.
   */
  stop() {
    this.#running = false
    const task = this.task
    this.task = null
    if (task === null) return this.#stopping ?? Promise.resolve()
    // Never rejects: SchedulerRegistry.deleteCronJob (at @nestjs/schedule's shutdown) does not await it.
    const stopping = task
      .stop()
      .catch((err) => this.#logger.error(`@Cron '${this.name}' could not stop: ${err.message}`, err.stack))
      .finally(() => {
        if (this.#stopping === stopping) this.#stopping = null
      })
    this.#stopping = stopping
    return stopping
  }

  /** The tick of the last occurrence run on this replica, or null. */
  lastDate() {
    return this.#lastDate
  }

  /** One run now, on exactly one live replica that takes part (`locker.trigger`): resolves `{ tick }`. */
  fireOnTick() {
    return this.#locker.trigger(this.name)
  }
}

/**
 * Makes `registry` (a SchedulerRegistry) refuse CronJobs that are not a @Cron method's `FleetCronJob`, naming the
 * replacement: they would run on every replica.
 */
function guardRegistry(registry) {
  if (registry.addCronJob.fleetGuarded) return
  const add = registry.addCronJob
  function addCronJob(name, job) {
    if (!(job instanceof FleetCronJob)) {
      throw invalidArg(TypeError, `SchedulerRegistry.addCronJob('${String(name)}') refused: ${REPLACEMENT}`)
    }
    return add.call(this, name, job)
  }
  addCronJob.fleetGuarded = true
  registry.addCronJob = addCronJob
}

module.exports = { FleetCronJob, guardRegistry }
