// A replica of a NestJS application written for @nestjs/schedule, adopting redis-snatch/nest (nest-registry.test.js):
// ScheduleModule.forRoot({ cronJobs: false }) beside SnatchModule, a @Cron method named 'notifications', and a service
// that reaches it through SchedulerRegistry as Nest code does. Run with ../ts-register.js. Environment: SNATCH_NEST
// (JSON): `options` (SnatchModule.forRoot's), `expr` (the @Cron's expression). It reports over IPC: `ready`, each
// occurrence's `tick`, and the answer of each `{ op, id }` message: 'get' (what getCronJob and getCronJobs show),
// 'stop' and 'start' (the job's, this replica's part), 'add' (addCronJob of a CronJob of the `cron` package); `{ close:
// true }` closes the application.
import 'reflect-metadata'
import { Injectable, Module } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { Cron, ScheduleModule, SchedulerRegistry } from '@nestjs/schedule'
import { CronJob } from 'cron'
import { type TickContext } from 'redis-snatch'
import { currentRun, SnatchModule } from 'redis-snatch/nest'

const config = JSON.parse(process.env.SNATCH_NEST ?? '{}')
const send = (message: object) => process.send?.({ pid: process.pid, ...message })

@Injectable()
class Notifications {
  @Cron(config.expr ?? '* * * * * *', { name: 'notifications', timeZone: 'UTC' })
  async notify(): Promise<void> {
    const { tick } = currentRun() as TickContext
    send({ event: 'tick', tick: tick.getTime() })
  }
}

/** What a service written for @nestjs/schedule does with the registry. */
@Injectable()
class Jobs {
  constructor(readonly registry: SchedulerRegistry) {}

  async op(op: string): Promise<object> {
    if (op === 'get') {
      const job = this.registry.getCronJob('notifications')
      return {
        running: job.isActive,
        source: String(job.cronTime.source),
        names: [...this.registry.getCronJobs().keys()],
        lastDate: job.lastDate()?.getTime() ?? null,
      }
    }
    if (op === 'stop') {
      await this.registry.getCronJob('notifications').stop()
      return { running: this.registry.getCronJob('notifications').isActive }
    }
    if (op === 'start') {
      this.registry.getCronJob('notifications').start()
      return { running: this.registry.getCronJob('notifications').isActive }
    }
    const job = new CronJob('* * * * * *', () => {
      send({ event: 'per-replica' })
    })
    this.registry.addCronJob('digest:user-42', job)
    job.start()
    return { added: true }
  }
}

@Module({
  imports: [ScheduleModule.forRoot({ cronJobs: false }), SnatchModule.forRoot(config.options)],
  providers: [Notifications, Jobs],
})
class AppModule {}

async function main() {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] })
  const jobs = app.get(Jobs)
  process.on('message', async (message: { op?: string; id?: number; close?: boolean }) => {
    if (message.close) {
      await app.close()
      process.disconnect()
      return
    }
    try {
      send({ event: 'answer', id: message.id, value: await jobs.op(message.op ?? '') })
    } catch (err) {
      send({ event: 'answer', id: message.id, code: (err as { code?: string }).code, message: (err as Error).message })
    }
  })
  send({ event: 'ready' })
}

main().catch((err) => {
  send({ event: 'failed', code: err.code, message: err.message })
  process.exitCode = 1
})
