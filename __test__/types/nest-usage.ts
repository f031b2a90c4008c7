// A strict TypeScript usage of every export of redis-snatch/nest, with Nest's compiler settings
// (experimentalDecorators, emitDecoratorMetadata): integrations.tsconfig.json. Lines under @ts-expect-error are misuse that
// must not type-check.
import 'reflect-metadata'
import { Injectable, Module } from '@nestjs/common'
import { Cron, CronExpression, ScheduleModule } from '@nestjs/schedule'
import { Locker, type StoredTickContext, type TaskContext, type TickContext } from 'redis-snatch'
import {
  currentRun,
  InjectLocker,
  Snatch,
  SnatchModule,
  SnatchHandler,
  SnatchSchedule,
  WithLock,
  type LockKey,
  type SnatchModuleAsyncOptions,
  type SnatchModuleOptions,
} from 'redis-snatch/nest'

class ConfigService {
  get(name: string): string | undefined {
    return process.env[name]
  }
}

@Module({ providers: [ConfigService], exports: [ConfigService] })
class ConfigModule {}

@Injectable()
export class ReportService {
  constructor(
    private readonly locker: Locker,
    @InjectLocker() private readonly same: Locker,
  ) {}

  @SnatchHandler('digest', { maxRunning: 20 })
  async sendDigest({ id, data, fence }: StoredTickContext): Promise<void> {
    void [id.length, data, fence + 1n]
    await this.locker.upsertSchedule('digest:42', { handler: 'digest', cron: '0 8 * * *', timezone: 'Asia/Tokyo' })
  }

  @Cron(CronExpression.EVERY_DAY_AT_8AM, { name: 'report:daily', timeZone: 'Europe/Paris' })
  @SnatchSchedule({ retries: 2, startingDeadline: 600_000, timeout: 60_000 })
  async sendDailyReport(): Promise<void> {
    const run = currentRun() as TickContext
    const tick: Date = run.tick
    const attempt: number = run.attempt
    run.signal.throwIfAborted()
    void [tick, attempt, this.locker, this.same]
  }

  @WithLock((orderId: string) => `orders:${orderId}`, { wait: 5000, ttl: 10_000 })
  async charge(orderId: string, cents: number): Promise<bigint> {
    const { fence, signal, validUntil }: TaskContext = currentRun()
    void [orderId, cents, signal, validUntil]
    return fence
  }

  @Snatch('cache:warm', { ttl: 30_000, minHold: 1000 })
  async warmCache(): Promise<number | undefined> {
    return 1
  }

  @Snatch(function (this: ReportService, region: string) {
    return `export:${region}`
  })
  async exportRegion(region: string): Promise<string | undefined> {
    return region
  }
}

const key: LockKey = (a: number) => `k:${a}`
const options: SnatchModuleOptions = { url: 'redis://127.0.0.1:6379', prefix: 'app:', global: false }
const asyncOptions: SnatchModuleAsyncOptions = {
  imports: [ConfigModule],
  inject: [ConfigService],
  useFactory: (config: ConfigService) => ({ url: config.get('REDIS_URL') }),
}

@Module({
  imports: [ScheduleModule.forRoot({ cronJobs: false }), SnatchModule.forRoot(options), SnatchModule.forRootAsync(asyncOptions)],
  providers: [ReportService],
})
export class AppModule {}
void key

export class Misuse {
  // @ts-expect-error a key function must return a string
  @WithLock((id: number) => id)
  async byNumber(id: number): Promise<void> {
    void id
  }

  // @ts-expect-error @Snatch resolves undefined where it loses: the method's type must admit it
  @Snatch('k')
  async total(): Promise<number> {
    return 1
  }

  // @ts-expect-error a locked method returns a Promise (the lock makes it asynchronous)
  @WithLock('k')
  syncMethod(): number {
    return 1
  }

  // @ts-expect-error a lock decorator applies to methods, not properties
  @WithLock('k') handler = async () => 1

  // @ts-expect-error options are checked: a typo is an error
  @WithLock('k', { waitt: 100 })
  async typo(): Promise<void> {}

  // @ts-expect-error @Snatch makes one attempt: it takes no wait
  @Snatch('k', { wait: 100 })
  async oneAttempt(): Promise<undefined> {
    return undefined
  }

  // @ts-expect-error SnatchSchedule takes schedule() options only
  @SnatchSchedule({ retry: 2 })
  @Cron('* * * * *')
  async cron(): Promise<void> {}
}
