'use strict'
// SnatchModule: the application's Locker as a provider (injected by its class, or @InjectLocker()), its @Cron
// methods run once across replicas through `locker.schedule()`, its @WithLock and @Snatch methods locked by it, and
// the Locker closed when the application shuts down.

const { Logger, Module } = require('@nestjs/common')
const { DiscoveryModule, DiscoveryService, MetadataScanner, ModuleRef } = require('@nestjs/core')
const { invalidArg } = require('../errors')
const { Locker } = require('../locker')
const { LOCKER_OPTIONS, checkType, closeDrain, snapshot } = require('../options')
const { planOf } = require('./crons')
const { handlerOf } = require('./decorators')
const { started, stopped } = require('./lockers')
const { FleetCronJob, guardRegistry } = require('./registry')
const { withRun } = require('./run-context')

/** @nestjs/schedule's SchedulerRegistry, where the application has @nestjs/schedule (an optional peer). */
const SchedulerRegistry = optionalRegistry()

/** The token of the Locker's options. */
const OPTIONS = Symbol('redis-snatch LockerOptions')
/** @nestjs/schedule's token of ScheduleModule's options (present where ScheduleModule is imported). */
const SCHEDULE_MODULE_OPTIONS = 'SCHEDULE_MODULE_OPTIONS'

/** The module: `SnatchModule.forRoot(options)` or `SnatchModule.forRootAsync({ imports, inject, useFactory })`. */
class SnatchModule {
  /**
   * The Locker made from `options`: LockerOptions, `global` (whether every module can inject it; default true) and
   * `shutdownTimeout` (how long running methods get to finish at shutdown, in ms; default: all the time they take).
   */
  static forRoot(options) {
    const { global, ...lockerOptions } = snapshotGlobal(options)
    return dynamicModule(global, [], { provide: OPTIONS, useValue: lockerOptions })
  }

  /**
   * The Locker made from the LockerOptions that `useFactory(...inject)` resolves, `inject` being providers of the
   * application or of `imports` (say ConfigService of ConfigModule), with `shutdownTimeout` too. `global` as for
   * forRoot.
   */
  static forRootAsync(options) {
    const o = snapshot('options', options, ['imports', 'inject', 'useFactory', 'global'])
    if (typeof o.useFactory !== 'function') {
      throw invalidArg(TypeError, 'forRootAsync needs useFactory: a function that returns the LockerOptions')
    }
    for (const name of ['imports', 'inject']) {
      if (o[name] !== undefined && !Array.isArray(o[name])) throw invalidArg(TypeError, `${name} must be an array`)
    }
    checkType('global', o.global, 'boolean')
    const factory = { provide: OPTIONS, useFactory: o.useFactory, inject: o.inject ?? [] }
    return dynamicModule(o.global, o.imports ?? [], factory)
  }
}
Module({})(SnatchModule)

/** `options` (LockerOptions, `global` and `shutdownTimeout`), with `global` checked; the Locker checks the rest. */
function snapshotGlobal(options) {
  const o = snapshot('options', options, [...LOCKER_OPTIONS, 'global', 'shutdownTimeout'])
  checkType('global', o.global, 'boolean')
  return o
}

/** The dynamic module of SnatchModule with the options' provider `options`. */
function dynamicModule(global = true, imports, options) {
  return {
    module: SnatchModule,
    global,
    imports: [DiscoveryModule, ...imports],
    providers: [
      options,
      { provide: Locker, useFactory: ({ shutdownTimeout, ...lockerOptions }) => new Locker(lockerOptions), inject: [OPTIONS] },
      {
        provide: SnatchRuntime,
        useFactory: (...deps) => new SnatchRuntime(...deps),
        inject: [
          Locker, DiscoveryService, MetadataScanner, ModuleRef, OPTIONS,
          ...(SchedulerRegistry === undefined ? [] : [{ token: SchedulerRegistry, optional: true }]),
        ],
      },
    ],
    exports: [Locker],
  }
}

/**
 * What SnatchModule does in the application's lifecycle: finds the @Cron methods and the instances whose locked
 * methods use its Locker (at module init, so that a refusal stops the application before anything runs), starts the
 * schedules (at bootstrap, when @nestjs/schedule starts its jobs), and closes the Locker at shutdown.
 */
class SnatchRuntime {
  #locker
  #discovery
  #scanner
  #moduleRef
  /** The @Cron methods to schedule (crons.js). */
  #plans = []
  /** The @SnatchHandler methods: `{ name, options, method, instance, where }`. */
  #handlers = []
  #logger = new Logger('SnatchModule')
  /** close()'s options at shutdown: `{ timeout }` when `shutdownTimeout` was given. */
  #closing
  /** @nestjs/schedule's SchedulerRegistry, where ScheduleModule is imported: it holds each @Cron method's job. */
  #registry

  constructor(locker, discovery, scanner, moduleRef, { shutdownTimeout }, registry) {
    this.#locker = locker
    // Guarded at once, before any provider's onModuleInit could add a CronJob.
    if (registry != null) {
      this.#registry = registry
      guardRegistry(registry)
    }
    this.#discovery = discovery
    this.#scanner = scanner
    this.#moduleRef = moduleRef
    this.#closing = shutdownTimeout === undefined ? undefined : { timeout: shutdownTimeout }
    // Checked now (at start-up), not when the application shuts down.
    closeDrain(this.#closing)
  }

  onModuleInit() {
    const instances = []
    const perReplica = []
    for (const wrapper of [...this.#discovery.getControllers(), ...this.#discovery.getProviders()]) {
      const { instance } = wrapper
      if (instance === null || typeof instance !== 'object' || !Object.getPrototypeOf(instance)) continue
      instances.push(instance)
      for (const method of this.#scanner.getAllMethodNames(Object.getPrototypeOf(instance))) {
        const handler = handlerOf(instance[method])
        if (handler !== undefined) {
          const where = `@SnatchHandler ${instance.constructor.name}.${method}`
          if (!wrapper.isDependencyTreeStatic()) {
            throw invalidArg(TypeError, `${where}: a method of a request-scoped provider cannot be a handler`)
          }
          const seen = this.#handlers.find((h) => h.name === handler.name)
          if (seen) throw invalidArg(TypeError, `${seen.where} and ${where} are both handler '${handler.name}'`)
          this.#handlers.push({ ...handler, method: instance[method], instance, where })
        }
        const plan = planOf(instance, method)
        if (plan === null) continue
        if (plan.perReplica !== undefined) {
          perReplica.push(plan)
          continue
        }
        if (!wrapper.isDependencyTreeStatic()) {
          throw invalidArg(TypeError, `${plan.where}: a @Cron method of a request-scoped provider cannot be scheduled`)
        }
        this.#plans.push({ ...plan, instance })
      }
    }
    checkNames(this.#plans)
    const scheduleModule = this.#scheduleModuleOptions()
    if (this.#plans.length > 0 && scheduleModule?.cronJobs) {
      throw invalidArg(
        TypeError,
        'ScheduleModule.forRoot() would run every @Cron method on every replica too: give it { cronJobs: false } beside SnatchModule',
      )
    }
    if (perReplica.length > 0 && scheduleModule === undefined) {
      const { where, perReplica: decorator } = perReplica[0]
      throw invalidArg(
        TypeError,
        `${where} has ${decorator}, which runs on every replica: import ScheduleModule.forRoot({ cronJobs: false }) beside SnatchModule to run it as Nest does, or make it a @Cron`,
      )
    }
    started(this.#locker, instances)
  }

  /**
   * Starts the schedules, each in SchedulerRegistry (where ScheduleModule is imported) as a `FleetCronJob`; when one
   * is refused (a bad cron expression), none runs and the Locker closes.
   */
  async onApplicationBootstrap() {
    try {
      for (const plan of this.#plans) {
        if (this.#registry === undefined) {
          if (plan.disabled) this.#logger.log(`@Cron '${plan.name}' is disabled: not scheduled`)
          else this.#task(plan)
          continue
        }
        const { name, cron, options, disabled } = plan
        const job = new FleetCronJob(this.#locker, name, cron, options.timezone, () => this.#task(plan), this.#logger)
        this.#registry.addCronJob(name, job)
        if (disabled) this.#logger.log(`@Cron '${name}' is disabled: not scheduled until its job's start()`)
        else job.start()
      }
      for (const handler of this.#handlers) this.#handle(handler)
    } catch (err) {
      await this.onApplicationShutdown()
      throw err
    }
  }

  /** Schedules the @Cron method of `plan`, logging its failures as @nestjs/schedule does: its ScheduledTask. */
  #task({ name, cron, options, method, instance }) {
    const task = this.#locker.schedule(name, cron, (ctx) => withRun(ctx, () => method.call(instance)), options)
    task.on('error', (err, { tick, attempt }) => {
      const what = `schedule '${name}' failed at ${tick.toISOString()} (attempt ${attempt})`
      this.#logger.error(`${what}: ${err instanceof Error ? err.message : String(err)}`, err?.stack)
    })
    return task
  }

  /** Runs the @SnatchHandler method of `handler` for its stored schedules, logging its failures. */
  #handle({ name, options, method, instance }) {
    const running = this.#locker.handle(name, (ctx) => withRun(ctx, () => method.call(instance, ctx)), options)
    running.on('error', (err, { id, tick, attempt }) => {
      const what = `stored schedule '${id}' (handler '${name}') failed at ${tick.toISOString()} (attempt ${attempt})`
      this.#logger.error(`${what}: ${err instanceof Error ? err.message : String(err)}`, err?.stack)
    })
  }

  /**
   * Running methods finish (within `shutdownTimeout`, when given: then their signals abort, and a @Cron method's
   * attempt is handed over to another replica), their locks are released, and the Locker closes.
   */
  async onApplicationShutdown() {
    stopped(this.#locker)
    await this.#locker.close(this.#closing)
  }

  /** ScheduleModule's options where it is imported, else undefined. */
  #scheduleModuleOptions() {
    try {
      return this.#moduleRef.get(SCHEDULE_MODULE_OPTIONS, { strict: false })
    } catch {
      return undefined
    }
  }
}

/** @nestjs/schedule's SchedulerRegistry class, or undefined without @nestjs/schedule. */
function optionalRegistry() {
  try {
    return require('@nestjs/schedule').SchedulerRegistry
  } catch {
    return undefined
  }
}

/** Two @Cron methods may not share a schedule's name. */
function checkNames(plans) {
  const seen = new Map()
  for (const { name, where } of plans) {
    if (seen.has(name)) throw invalidArg(TypeError, `${seen.get(name)} and ${where} are both schedule '${name}': give one a @Cron name`)
    seen.set(name, where)
  }
}

module.exports = { SnatchModule }
