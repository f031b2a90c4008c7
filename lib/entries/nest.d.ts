/**
 * `redis-snatch/nest`. NestJS: the module, the decorators and `currentRun()`.
 * @module nest
 */
import type { DynamicModule, ModuleMetadata } from '@nestjs/common'
import type { LockerOptions, LockOptions, ScheduleOptions, TaskContext, TickContext, WaitOptions } from '../../index'

/** SnatchModule.forRoot's options: a Locker's, and whether every module can inject it (`global`, default true). */
export interface SnatchModuleOptions extends LockerOptions {
  /** Whether every module can inject the Locker without importing SnatchModule (default true). */
  global?: boolean
  /**
   * How long running methods get to finish at application shutdown, in ms: then their signals abort (ClosedError),
   * and a @Cron method's attempt is recorded interrupted and run again at once by another replica. Default: all the
   * time they take (`locker.close()`'s `timeout`).
   */
  shutdownTimeout?: number
}

/** SnatchModule.forRootAsync's options: the LockerOptions from a factory of injected providers (ConfigService). */
export interface SnatchModuleAsyncOptions {
  /** The modules whose providers `inject` names (say, ConfigModule). */
  imports?: ModuleMetadata['imports']
  /** The providers `useFactory` gets, in order (say, ConfigService). */
  inject?: any[]
  /** Makes the Locker's options (and `shutdownTimeout`) from the injected providers. */
  useFactory: (...deps: any[]) => Omit<SnatchModuleOptions, 'global'> | Promise<Omit<SnatchModuleOptions, 'global'>>
  /** Whether every module can inject the Locker without importing SnatchModule (default true). */
  global?: boolean
}

/**
 * The application's Locker as a provider (inject the `Locker` class, or `@InjectLocker()`), closed at application
 * shutdown (running work ends first, within `shutdownTimeout`). Every `@Cron` method of @nestjs/schedule runs each occurrence on exactly one
 * replica through `locker.schedule()`; keep `ScheduleModule.forRoot({ cronJobs: false })` beside it for `@Interval`
 * and `@Timeout`, which stay per replica, and for `SchedulerRegistry`, which then holds each `@Cron` method's job
 * (`getCronJob(name)`: `isActive`, `start()`/`stop()` of this replica's part, `lastDate()`, `fireOnTick()`) and refuses
 * a CronJob added at run time (`addCronJob`), which would run on every replica (ERR_SNATCH_INVALID_ARG, naming stored
 * schedules as the replacement).
 */
export declare class SnatchModule {
  /** The module with a Locker of `options`. */
  static forRoot(options?: SnatchModuleOptions): DynamicModule
  /** The module with a Locker whose options a factory makes from injected providers. */
  static forRootAsync(options: SnatchModuleAsyncOptions): DynamicModule
}

/** Injects the application's Locker; the same as a constructor parameter of type `Locker`. */
export declare function InjectLocker(): ParameterDecorator

/**
 * `locker.schedule()`'s options for the @Cron method it decorates. The time zone comes from @Cron's `timeZone`
 * (else `timezone` here, else the process's own zone, as @nestjs/schedule does); the schedule's name is @Cron's
 * `name`, else `ClassName.methodName`.
 */
export declare function SnatchSchedule(options: ScheduleOptions): MethodDecorator

/**
 * The method runs the occurrences of the stored schedules whose handler is `name` (`locker.handle(name, fn,
 * options)`) on this replica, called with the occurrence's context (`ctx.id`, `ctx.data`, `ctx.tick`, `ctx.fence`,
 * `ctx.signal`; `currentRun()` inside too). Schedules are created at runtime with `locker.upsertSchedule(id, { handler:
 * name, ... })`: the replacement for `SchedulerRegistry.addCronJob`, which runs once across the replicas.
 */
export declare function SnatchHandler(name: string, options?: { maxRunning?: number }): MethodDecorator

/** A lock's name: a string, or a function of the decorated method's arguments (called with the instance as `this`). */
export type LockKey = string | ((...args: any[]) => string)

/** A method that a lock decorator can wrap: one that returns a Promise, as the locked method does. */
type AsyncMethod = (...args: any[]) => Promise<unknown>

/**
 * The method runs under lock `key`, waiting for it as `locker.withLock()` does (`options.wait`; LockTimeoutError
 * when it did not come), and resolves the method's value. Inside it, `currentRun()` gives the run's signal, fence and
 * validUntil.
 */
export declare function WithLock(
  key: LockKey,
  options?: WaitOptions,
): <M extends AsyncMethod>(target: object, propertyKey: string | symbol, descriptor: TypedPropertyDescriptor<M>) => void

/**
 * The method runs only where lock `key` is won, as `locker.snatchTask()` does: it resolves the method's value, or
 * `undefined` where another process holds the key. So its return type must admit `undefined`
 * (`Promise<T | undefined>`).
 */
export declare function Snatch(
  key: LockKey,
  options?: LockOptions,
): <M extends AsyncMethod>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<M> &
    (undefined extends Awaited<ReturnType<M>> ? unknown : { '@Snatch resolves undefined where it loses': undefined }),
) => void

/**
 * The run that the calling code executes in: a @Cron method's (a TickContext: `tick`, `attempt`, `why` too) or a
 * @WithLock or @Snatch method's, through every `await` of it. Throws `ERR_SNATCH_NO_RUN` outside one.
 */
export declare function currentRun(): TaskContext | TickContext
