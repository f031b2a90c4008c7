'use strict'
// redis-snatch/nest in one process (NestJS 11): what SnatchModule refuses at bootstrap rather than change silently,
// forRootAsync with an injected configuration, injection, disabled crons, @Interval beside ScheduleModule, and the
// errors of misused decorators. Decorators are applied as tsc compiles them (support/nest-app.js).

require('reflect-metadata')
const { Injectable, Module } = require('@nestjs/common')
const { NestFactory } = require('@nestjs/core')
const { Cron, Interval, ScheduleModule, SchedulerRegistry, Timeout } = require('@nestjs/schedule')
const { Locker } = require('../..')
const { currentRun, InjectLocker, Snatch, SnatchModule, SnatchSchedule, WithLock } = require('redis-snatch/nest')
const { decorate } = require('../support/nest-app')
const { uniqueKey, until } = require('../support/util')

/** An application of `providers` with `imports`; its context, once initialized. */
async function app(imports, providers) {
  class AppModule {}
  Module({ imports, providers })(AppModule)
  return NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false })
}

/** SnatchModule on this test's own prefix. */
function snatchModule(extra = {}) {
  return SnatchModule.forRoot({ url: process.env.REDIS_URL, prefix: `${uniqueKey('nest-module')}:`, ...extra })
}

/** A provider class with one method `run`, decorated with `decorators`. */
function jobWith(...decorators) {
  class Job {
    async run() {}
  }
  decorate(Job, 'run', ...decorators)
  Injectable()(Job)
  return Job
}

/** The error `app(imports, providers)` rejects with. */
function bootstrapError(imports, providers) {
  return app(imports, providers).then(
    async (context) => {
      await context.close()
      throw new Error('the application started')
    },
    (err) => err,
  )
}

describe('refused at bootstrap, with ERR_SNATCH_INVALID_ARG', () => {
  test.each([
    ['ScheduleModule running @Cron too', () => [[ScheduleModule.forRoot(), snatchModule()], [jobWith(Cron('* * * * *'))]], /cronJobs: false/],
    ['@Interval without ScheduleModule', () => [[snatchModule()], [jobWith(Interval(1000))]], /Job\.run has @Interval, which runs on every replica/],
    ['@Timeout without ScheduleModule', () => [[snatchModule()], [jobWith(Timeout(1000))]], /@Timeout/],
    ["@Cron's utcOffset", () => [[snatchModule()], [jobWith(Cron('* * * * *', { utcOffset: 2 }))]], /utcOffset has no fleet-wide meaning/],
    ["@Cron's threshold", () => [[snatchModule()], [jobWith(Cron('* * * * *', { threshold: 1000 }))]], /startingDeadline/],
    ["@Cron's initialDelay", () => [[snatchModule()], [jobWith(Cron('* * * * *', { initialDelay: 1000 }))]], /initialDelay/],
    ["@Cron's unrefTimeout", () => [[snatchModule()], [jobWith(Cron('* * * * *', { unrefTimeout: true }))]], /unrefTimeout/],
    ['a @Cron option unknown to redis-snatch', () => [[snatchModule()], [jobWith(Cron('* * * * *', { jitter: 5 }))]], /option 'jitter' is unknown/],
    ['a Date as cronTime', () => [[snatchModule()], [jobWith(Cron(new Date(Date.now() + 60_000)))]], /needs a cron expression \(a string\)/],
    ['@SnatchSchedule without @Cron', () => [[snatchModule()], [jobWith(SnatchSchedule({ retries: 1 }))]], /has @SnatchSchedule but no @Cron/],
    ['a time zone given twice', () => [[snatchModule()], [jobWith(Cron('* * * * *', { timeZone: 'UTC' }), SnatchSchedule({ timezone: 'UTC' }))]], /time zone once/],
    ['two @Cron methods of one name', () => [[snatchModule()], [jobWith(Cron('* * * * *', { name: 'same' })), jobWith(Cron('0 * * * *', { name: 'same' }))]], /are both schedule 'same'/],
    ['a bad cron expression', () => [[snatchModule()], [jobWith(Cron('61 * * * *'))]], /cron/],
    ['a bad option value in SnatchModule.forRoot', () => [[SnatchModule.forRoot({ url: process.env.REDIS_URL, ttl: -1 })], []], /ttl/],
    ['a negative shutdownTimeout', () => [[snatchModule({ shutdownTimeout: -5 })], []], /timeout must be/],
  ])('%s', async (_, setup, message) => {
    const err = await bootstrapError(...setup())
    expect(err).toMatchObject({ code: 'ERR_SNATCH_INVALID_ARG', message: expect.stringMatching(message) })
  })
})

test("@Interval and @Timeout stay per replica with ScheduleModule.forRoot({ cronJobs: false }); a disabled @Cron is not scheduled until its job's start()", async () => {
  let intervals = 0
  class Ticker {
    every() {
      intervals++
    }
    async never() {}
  }
  decorate(Ticker, 'every', Interval('ticker', 50))
  decorate(Ticker, 'never', Cron('* * * * * *', { name: 'disabled-cron', disabled: true }))
  Injectable()(Ticker)
  const context = await app([ScheduleModule.forRoot({ cronJobs: false }), snatchModule()], [Ticker])
  await new Promise((resolve) => {
    const check = setInterval(() => intervals >= 2 && (clearInterval(check), resolve()), 10)
  })
  expect(context.get(SchedulerRegistry).getIntervals()).toEqual(['ticker'])
  expect(await context.get(Locker).schedules()).toEqual([])
  // As with @nestjs/schedule, the disabled @Cron's job is in the registry, not running, until its start().
  const job = context.get(SchedulerRegistry).getCronJob('disabled-cron')
  expect([job.isActive, job.cronTime.source]).toEqual([false, '* * * * * *'])
  job.start()
  expect(job.isActive).toBe(true)
  await new Promise((resolve) => job.task.once('run', resolve))
  expect((await context.get(Locker).schedules()).map((s) => s.name)).toEqual(['disabled-cron'])
  await context.close()
})

test('forRootAsync takes LockerOptions from an injected provider of an imported module; Locker is injected by class and by @InjectLocker()', async () => {
  const prefix = `${uniqueKey('nest-async')}:`
  class Config {
    get(name) {
      return { REDIS_URL: process.env.REDIS_URL, PREFIX: prefix }[name]
    }
  }
  Injectable()(Config)
  class ConfigModule {}
  Module({ providers: [Config], exports: [Config] })(ConfigModule)
  class Consumer {
    constructor(byClass, byDecorator) {
      this.byClass = byClass
      this.byDecorator = byDecorator
    }
  }
  Injectable()(Consumer)
  Reflect.defineMetadata('design:paramtypes', [Locker, Object], Consumer)
  InjectLocker()(Consumer, undefined, 1)
  const context = await app(
    [
      SnatchModule.forRootAsync({
        imports: [ConfigModule],
        inject: [Config],
        useFactory: async (config) => ({ url: config.get('REDIS_URL'), prefix: config.get('PREFIX') }),
      }),
    ],
    [Consumer],
  )
  const consumer = context.get(Consumer)
  expect(consumer.byClass).toBeInstanceOf(Locker)
  expect(consumer.byDecorator).toBe(consumer.byClass)
  const fence = await consumer.byClass.withLock('k', ({ fence }) => fence)
  expect(typeof fence).toBe('bigint')
  await context.close()
  // Closed with the application.
  await expect(consumer.byClass.withLock('k', () => {})).rejects.toMatchObject({ code: 'ERR_SNATCH_CLOSED' })
})

test("shutdownTimeout: at shutdown a locked method gets that long, then its signal aborts (ClosedError)", async () => {
  let started
  const running = new Promise((resolve) => (started = resolve))
  let reason
  class Job {
    async run() {
      const { signal } = currentRun()
      started()
      await new Promise((resolve) => signal.addEventListener('abort', () => ((reason = signal.reason), resolve()), { once: true }))
      return 'stopped'
    }
  }
  decorate(Job, 'run', WithLock(uniqueKey('shutdown')))
  Injectable()(Job)
  const context = await app([snatchModule({ shutdownTimeout: 100 })], [Job])
  const done = context.get(Job).run()
  await running
  await context.close()
  expect({ value: await done, code: reason?.code }).toEqual({ value: 'stopped', code: 'ERR_SNATCH_CLOSED' })
})

test('unknown options, forRootAsync without useFactory, and options of the wrong type are errors at once', () => {
  expect(() => SnatchModule.forRootAsync({ useClass: Object })).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG', message: expect.stringMatching(/useClass/) }))
  expect(() => SnatchModule.forRootAsync({ inject: [] })).toThrow(/needs useFactory/)
  expect(() => SnatchModule.forRoot({ global: 'yes' })).toThrow(/global must be a boolean/)
  expect(() => SnatchModule.forRoot({ isGlobal: true })).toThrow("unknown option 'isGlobal' (did you mean 'global'?)")
  expect(() => SnatchModule.forRoot({ prefx: 'x:' })).toThrow("unknown option 'prefx' (did you mean 'prefix'?)")
})

describe('decorators', () => {
  test('misuse is an error when the class is defined: not a method, no key, a typo in the options', () => {
    class C {
      async m() {}
    }
    const on = (decorator, key, descriptor) => () => decorator(C.prototype, key, descriptor)
    expect(on(WithLock('k'), 'handler', undefined)).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG', message: '@WithLock applies to methods; C.handler is not one' }))
    expect(on(Snatch('k'), 'field', { value: 42 })).toThrow('@Snatch applies to methods; C.field is not one')
    expect(() => WithLock(42)).toThrow(/@WithLock needs a key: a non-empty string or a function/)
    expect(() => WithLock('')).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG', message: expect.stringMatching(/needs a key/) }))
    expect(() => WithLock('k', { waitt: 100 })).toThrow("unknown option 'waitt' (did you mean 'wait'?)")
    expect(() => Snatch('k', { wait: 100 })).toThrow(/takes no wait option/)
    expect(() => SnatchSchedule({ retry: 1 })).toThrow(/unknown option 'retry'; known options: .*retries/)
  })

  test('a key function that returns no string rejects the call; currentRun() outside a run throws ERR_SNATCH_NO_RUN', async () => {
    class Orders {
      async charge() {
        return currentRun().key
      }
    }
    decorate(Orders, 'charge', WithLock((id) => id))
    Injectable()(Orders)
    const context = await app([snatchModule()], [Orders])
    const orders = context.get(Orders)
    await expect(orders.charge('o-1')).resolves.toBe('o-1')
    await expect(orders.charge(7)).rejects.toMatchObject({
      code: 'ERR_SNATCH_INVALID_ARG',
      message: 'the key function of @WithLock Orders.charge must return a string, got a number',
    })
    expect(() => currentRun()).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_NO_RUN' }))
    await context.close()
    // Outside any application, a locked method says why it cannot run.
    await expect(new Orders().charge('o-2')).rejects.toMatchObject({ code: 'ERR_SNATCH_NO_LOCKER' })
  })

  test("a decorated method keeps its name and the metadata of decorators applied before it (Nest's too)", () => {
    class C {
      async run() {}
    }
    decorate(C, 'run', WithLock('k'), Cron('* * * * *', { name: 'kept' }))
    expect(C.prototype.run.name).toBe('run')
    expect(Reflect.getMetadata('SCHEDULE_CRON_OPTIONS', C.prototype.run)).toMatchObject({ name: 'kept' })
  })
})

describe('a decorated method calling another on a key it holds (reentrancy)', () => {
  /** A provider whose `outer` (@WithLock on 'order') calls `inner` (decorated with `innerDecorator` on 'order'). */
  function nested(innerDecorator) {
    class Orders {
      async outer() {
        const { fence } = currentRun()
        return { fence, inner: await this.inner().then((value) => ({ value }), (error) => ({ error })) }
      }

      async inner() {
        return currentRun().fence
      }
    }
    decorate(Orders, 'outer', WithLock('order', { wait: 60_000 }))
    decorate(Orders, 'inner', innerDecorator)
    Injectable()(Orders)
    return Orders
  }

  test('@WithLock inside @WithLock on the same key rejects ReentrantError at once; @Snatch resolves undefined', async () => {
    const Waiting = nested(WithLock('order', { wait: 60_000 }))
    const OneAttempt = nested(Snatch('order'))
    const context = await app([snatchModule()], [Waiting, OneAttempt])
    const waiting = await context.get(Waiting).outer()
    expect(waiting.inner.error).toMatchObject({ name: 'ReentrantError', code: 'ERR_SNATCH_REENTRANT', key: 'order' })
    expect((await context.get(OneAttempt).outer()).inner).toEqual({ value: undefined })
    await context.close()
  })

  test('with reentrant: true the inner method runs under the held lock, with its fence', async () => {
    const Orders = nested(WithLock('order', { reentrant: true, wait: 60_000 }))
    const Tasks = nested(Snatch('order', { reentrant: true }))
    const context = await app([snatchModule()], [Orders, Tasks])
    for (const Class of [Orders, Tasks]) {
      const { fence, inner } = await context.get(Class).outer()
      expect(inner).toEqual({ value: fence })
    }
    await context.close()
  })
})

test('@SnatchHandler makes a provider method the handler of stored schedules added at runtime (addCronJob replaced)', async () => {
  const handler = uniqueKey('nest-handler')
  const ran = []
  class Reports {
    constructor(locker) {
      this.locker = locker
    }
    // What `schedulerRegistry.addCronJob(...)` did per entity, now stored and run once across the replicas.
    async add(customer) {
      await this.locker.upsertSchedule(`${handler}:${customer}`, { handler, at: Date.now() + 100, data: { customer } })
    }
    async send({ id, data, fence }) {
      ran.push({ id, data, fence, run: currentRun() !== undefined })
    }
  }
  decorate(Reports, 'send', require('redis-snatch/nest').SnatchHandler(handler))
  Injectable()(Reports)
  Reflect.defineMetadata('design:paramtypes', [Locker], Reports)
  const context = await app([snatchModule()], [Reports])
  try {
    await context.init()
    await context.get(Reports).add('acme')
    await until(() => ran.length > 0, 'the stored occurrence to run', 15_000)
    expect(ran).toEqual([{ id: `${handler}:acme`, data: { customer: 'acme' }, fence: expect.any(BigInt), run: true }])
  } finally {
    await context.close()
  }
})
