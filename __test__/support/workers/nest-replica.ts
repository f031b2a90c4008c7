// A replica of a NestJS application for the Nest tests (nest.test.js), written as a user would: a @Cron method with
// @SnatchSchedule, and @WithLock / @Snatch methods with keys from their arguments. Run with ../ts-register.js.
// Environment: SNATCH_NEST (JSON): `options` (SnatchModule.forRoot's), `cron` ({ name, expr, timeZone, mode, schedule }: mode
// 'quick' returns at once, 'slow' takes 1.5 s, 'fail-first' throws on attempt 1, 'hang-first' never settles on
// attempt 1), `shutdownHooks` (enableShutdownHooks). It reports over IPC: `ready`, each attempt's `start` and `end`,
// and the result of each `{ call, args, id }` message (`result` or `error`); `{ close: true }` closes the application.
import 'reflect-metadata'
import { Injectable, Module } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { Cron } from '@nestjs/schedule'
import { Locker, type TickContext } from 'redis-snatch'
import { currentRun, InjectLocker, Snatch, SnatchModule, SnatchSchedule, WithLock } from 'redis-snatch/nest'

const config = JSON.parse(process.env.SNATCH_NEST ?? '{}')
const cron = config.cron ?? { name: 'nest-replica-idle', expr: '0 0 1 1 *', mode: 'quick' }
const send = (message: object) => process.send?.({ pid: process.pid, ...message })
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

@Injectable()
class Jobs {
  @Cron(cron.expr, { name: cron.name, timeZone: cron.timeZone })
  @SnatchSchedule(cron.schedule ?? {})
  async report(): Promise<void> {
    const { tick, attempt, why, fence } = currentRun() as TickContext
    const about = { tick: tick.getTime(), attempt, why, fence: String(fence) }
    send({ event: 'start', ...about })
    if (cron.mode === 'fail-first' && attempt === 1) throw new Error('the first attempt fails')
    if (cron.mode === 'hang-first' && attempt === 1) await new Promise(() => {})
    if (cron.mode === 'slow') await sleep(1500)
    send({ event: 'end', ...about })
  }
}

/** Ends the exportRegion call that waits to be told. */
let finish: (value?: unknown) => void = () => {}

@Injectable()
class Orders {
  constructor(
    readonly locker: Locker,
    @InjectLocker() readonly injected: Locker,
  ) {}

  /** Holds `orders:<id>` for `ms`, reporting when it entered and left. */
  @WithLock((id: string) => `orders:${id}`, { wait: 20_000 })
  async charge(id: string, ms: number): Promise<{ fence: string; entered: number; left: number }> {
    const entered = Date.now()
    send({ event: 'entered', key: currentRun().key })
    await sleep(ms)
    return { fence: String(currentRun().fence), entered, left: Date.now() }
  }

  /** Runs where it wins `exports:<region>`, holding it for `ms` (null: until the test sends `{ finish: true }`). */
  @Snatch((region: string) => `exports:${region}`)
  async exportRegion(region: string, ms: number | null): Promise<string | undefined> {
    await (ms === null ? new Promise((resolve) => (finish = resolve)) : sleep(ms))
    return `${region} exported by ${process.pid}`
  }

  /** Waits until its signal aborts (its lease lost): the reason's code. */
  @WithLock(function (this: Orders, key: string) {
    return key
  }, { ttl: 2000 })
  async untilLost(key: string): Promise<string> {
    const { signal } = currentRun()
    send({ event: 'holding', key })
    await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
    return (signal.reason as { code?: string }).code ?? 'no code'
  }
}

@Module({ imports: [SnatchModule.forRoot(config.options)], providers: [Jobs, Orders] })
class AppModule {}

async function main() {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] })
  if (config.shutdownHooks) app.enableShutdownHooks()
  const orders = app.get(Orders)
  type Message = { call?: keyof Orders; args?: unknown[]; id?: number; close?: boolean; finish?: boolean }
  process.on('message', async (message: Message) => {
    if (message.finish) return finish()
    if (message.close) {
      await app.close()
      process.disconnect()
      return
    }
    try {
      const method = orders[message.call as 'charge'] as (...args: unknown[]) => Promise<unknown>
      send({ event: 'result', id: message.id, value: await method.apply(orders, message.args ?? []) })
    } catch (err) {
      send({ event: 'error', id: message.id, code: (err as { code?: string }).code, message: (err as Error).message })
    }
  })
  send({ event: 'ready', sameLocker: orders.locker === orders.injected && orders.locker instanceof Locker })
}

main().catch((err) => {
  send({ event: 'failed', code: err.code, message: err.message })
  process.exitCode = 1
})
