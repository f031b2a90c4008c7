// Type test (strict tsc --noEmit): every public name, and wrong calls rejected. `npm test` checks it in the
// repository (__test__/types/tsconfig.json, resolving 'redis-snatch' to the package itself), and the pack test
// copies it into its temp project as usage.mts (ESM: the `import` condition, index.d.mts) and usage.cts
// (CommonJS: the `require` condition, index.d.ts), checked under node16, nodenext and bundler resolution, and as
// usage.ts, checked under node10 resolution (CommonJS, without `exports`: `types` and `typesVersions`).
import {
  ClosedError,
  createLocker,
  Lock,
  Locker,
  LockLostError,
  LockTimeoutError,
  NoReplicaError,
  QuorumError,
  RedisError,
  ReentrantError,
  RunReplacedError,
  RunTimeoutError,
  snatchTask,
  SnatchError,
  StaleFenceError,
  type AttemptInfo,
  type ContendedKey,
  type Handler,
  type StoredScheduleInfo,
  type StoredScheduleSpec,
  type StoredTickContext,
  type LeaderContext,
  type LeaderObserver,
  type Leadership,
  type LeadOptions,
  type RevokeReason,
  type HeldLock,
  type Inspection,
  type OccurrenceRecord,
  type RunReason,
  type ScheduleInfo,
  type Semaphore,
  type ReadWriteLock,
  type AcquireMessage,
  type LeaseMessage,
  type ReleaseMessage,
  type ErrorMessage,
  type StartMessage,
  type BusyMessage,
  type AttemptMessage,
  type MissedMessage,
  type ScheduleHealth,
  type CloseOptions,
  type LockerOptions,
  type LockHandle,
  MultiLock,
  type MultiTaskContext,
  ResultError,
  type SharedOptions,
  type LockOptions,
  type RedisClientLike,
  type ScheduledTask,
  type ScheduleOptions,
  type SnatchResult,
  type TaskContext,
  type TickContext,
  type TlsOptions,
  type WaitOptions,
} from 'redis-snatch'
import { createDashboard, type DashboardOptions } from 'redis-snatch/dashboard'
import {
  createMetricsHandler,
  registerMetrics,
  type MetricsHandlerOptions,
  type PromClientRegistry,
  type RegisterMetricsOptions,
} from 'redis-snatch/prometheus'
import { idempotency, fastifyIdempotency, type IdempotencyOptions, type IdempotencyRun } from 'redis-snatch/idempotency'
import { fenced, fenceTableSql, StaleFenceError as FenceStaleError, type FencedOptions } from 'redis-snatch/fence'
import { createServer } from 'node:http'

/** Uses every export the way the docs do; never called, only type-checked. */
export async function usage(): Promise<void> {
  const options: LockerOptions = { url: 'redis://127.0.0.1:6379', prefix: 'app:', ttl: 10_000, commandTimeout: 500, maxStall: 30_000 }
  const redlock: LockerOptions = { urls: ['redis://a:6379', 'redis://b:6379', 'redis://c:6379'], driftFactor: 0.01 }
  const locker: Locker = createLocker(options)
  new Locker(redlock)
  const tls: TlsOptions = { ca: [Buffer.from('pem'), 'pem'], cert: 'pem', key: Buffer.from('pem'), servername: 'redis.test' }
  const deployments: LockerOptions[] = [
    { url: 'rediss://10.0.0.5:6380', username: 'snatch', password: 'secret', tls, waitReplicas: 1 },
    { cluster: ['redis://10.0.0.1:7000', 'rediss://10.0.0.2:7000'], tls: { rejectUnauthorized: false } },
    { sentinel: { urls: ['redis://:pass@10.0.0.1:26379'], name: 'mymaster' }, password: 'secret' },
  ]
  const ioredisLike: RedisClientLike = { status: 'ready', isCluster: false }
  const nodeRedisLike: RedisClientLike = { isOpen: true }
  new Locker({ client: ioredisLike, prefix: 'app:' })
  new Locker({ client: nodeRedisLike })
  // @ts-expect-error client gives where to connect: not a URL
  new Locker({ client: 'redis://127.0.0.1:6379' })
  void deployments

  const result: SnatchResult<string> = await snatchTask('k', async ({ signal, fence, key }: TaskContext) => {
    signal.throwIfAborted()
    return `${key}:${fence}`
  })
  if (result.ran) {
    const value: string = result.value
    const fence: bigint = result.fence
    void value, fence
  } else {
    // @ts-expect-error no value when the task did not run
    void result.value
  }

  const lockOptions: LockOptions = { ttl: 1000, autoExtend: true, minHold: 500 }
  const waitOptions: WaitOptions = { ...lockOptions, wait: 2000 }
  const n: number = await locker.withLock('k', () => 1, waitOptions)
  const maybe: Lock | null = await locker.tryLock('k', lockOptions)
  const lock: Lock = await locker.lock('k', { wait: 100, fair: true })
  const fields: [string, string, bigint, AbortSignal, number] = [lock.key, lock.token, lock.fence, lock.signal, lock.validUntil]
  const extended: boolean = await lock.extend(5000)
  const released: boolean = await lock.release()
  await lock[Symbol.asyncDispose]()
  void n, maybe, fields, extended, released

  const held: Inspection | null = await locker.inspect('k')
  if (held) void [held.ttl + 1, held.fence + 1n, held.holders + 1, held.holder?.length]
  const forced: boolean = await locker.forceRelease('k')
  void forced

  const uploads: Semaphore = locker.semaphore('uploads', 3)
  const limit: number = uploads.limit
  const permit: Lock | null = await uploads.tryAcquire({ ttl: 1000 })
  const waited: Lock = await uploads.acquire({ wait: 100 })
  const permitted: string = await uploads.withPermit(({ fence, key }) => `${key}:${fence + 1n}`, { wait: 10 })
  void [limit, permit, waited, permitted]

  const doc: ReadWriteLock = locker.rwlock('doc')
  const reading: Lock = await doc.read({ wait: 100, ttl: 1000 })
  const writing: Lock | null = await doc.tryWrite()
  const read: string = await doc.withRead(({ fence, key, signal }) => `${key}:${fence + 1n}:${signal.aborted}`)
  const written: number = await doc.withWrite(async () => 1, { wait: 10, autoExtend: false })
  void [doc.key, reading, writing, read, written, await doc.write(), await doc.tryRead()]
  // @ts-expect-error a read-write lock has no limit
  void doc.limit
  // @ts-expect-error fn is required
  void doc.withWrite()

  const leased = (m: LeaseMessage) => [m.key, m.fence + 1n, m.ms + 1]
  const acquired = (m: AcquireMessage) => m.direct && leased(m)
  const ended = (m: ReleaseMessage) => m.released && leased(m)
  const failed = (m: ErrorMessage) => [m.key, m.fence, m.ms, m.error.message]
  const started = (m: StartMessage) => [m.method, m.schedule, m.tick?.getTime(), m.fence === undefined ? 0n : m.fence + 1n]
  const busy = (m: BusyMessage) => [m.key, m.ms + 1, m.start?.method]
  const attempted = (m: AttemptMessage) => [m.schedule, m.ending === 'ok', m.lagMs + m.durationMs, m.fence + 1n]
  const missed = (m: MissedMessage) => [m.schedule, m.tick.getTime(), m.reason]
  void [acquired, ended, failed, started, busy, attempted, missed]

  const scheduleOptions: ScheduleOptions = {
    ttl: 60_000,
    timezone: 'Europe/Paris',
    startingDeadline: 900_000,
    retries: 2,
    retryDelay: 1000,
    concurrency: 'replace',
    timeout: 60_000,
    maxRuntime: 120_000,
    history: 100,
    jitter: 30_000,
  }
  const buffered: ScheduleOptions = { concurrency: 'buffer', jitter: 0 }
  // @ts-expect-error: not a concurrency
  const queued: ScheduleOptions = { concurrency: 'queue' }
  void [buffered, queued]
  const task: ScheduledTask = locker.schedule('report', '0 6 * * *', ({ tick, fence, attempt, why }: TickContext) => {
    const when: Date = tick
    const reason: RunReason = why
    return [when, fence, attempt + 1, reason]
  }, scheduleOptions)
  task.on('run', ({ tick, fence, durationMs, attempt, why }) => void [tick.getTime(), fence + 1n, durationMs + 1, attempt, why])
  task.on('skip', ({ reason }) => void (reason === 'suspended'))
  task.on('error', (err, info: AttemptInfo) => void [err, info.tick, info.attempt, info.why])
  await task.stop()

  const handler: Handler = locker.handle('digest', async ({ id, data, tick, fence, signal }: StoredTickContext) => {
    return [id.length, data, tick.getTime(), fence + 1n, signal.aborted]
  }, { maxRunning: 10 })
  const spec: StoredScheduleSpec = { handler: 'digest', cron: '0 8 * * *', timezone: 'Europe/Paris', data: { user: 42 } }
  const stored: StoredScheduleInfo = await locker.upsertSchedule('digest:42', spec)
  void [stored.next?.getTime(), stored.health === 'orphaned', stored.runs + 1]
  await locker.upsertSchedule('cleanup:1', { handler: 'cleanup', at: new Date(Date.now() + 7_200_000), retries: 3 })
  const page = await locker.listSchedules({ handler: 'digest', limit: 100, cursor: null })
  void [page.schedules.map((s) => s.id), page.cursor ?? 'last']
  const removed: boolean = await locker.removeSchedule('digest:42')
  void [removed, await locker.getSchedule('digest:42')]
  // @ts-expect-error a stored schedule needs its handler
  await locker.upsertSchedule('x', { every: 5000 })
  await handler.stop()

  const leadOptions: LeadOptions = { ttl: 10_000, retry: 500 }
  const leadership: Leadership = locker.lead('feed', async ({ signal, term, fence, validUntil }: LeaderContext) => {
    while (!signal.aborted && validUntil > Date.now()) await new Promise((r) => setTimeout(r, 100))
    return term === fence
  }, leadOptions)
  leadership.on('elected', ({ term, fence }) => void (term + fence))
  leadership.on('revoked', ({ term, reason }: { term: bigint; reason: RevokeReason }) => void [term, reason])
  const leading: boolean = leadership.isLeader
  const leaderId: string | null = leadership.leader
  await leadership.resign()
  await leadership.stop()
  const observer: LeaderObserver = locker.observe('feed')
  observer.on('change', ({ leader, term }) => void [leader?.length, term === null ? 0n : term + 1n])
  observer.close()
  void [leading, leaderId]

  const schedules: ScheduleInfo[] = await locker.schedules()
  const next: Date | null = schedules[0]?.next ?? null
  const health: ScheduleHealth = schedules[0]?.health ?? 'orphaned'
  const lastSuccess: Date | null = schedules[0]?.lastSuccess ?? null
  const failures: number = schedules[0]?.recent.failed ?? 0
  void [health === 'stuck', lastSuccess, failures]
  const records: OccurrenceRecord[] = await locker.history('report', { limit: 10 })
  const outcome: OccurrenceRecord['outcome'] = records[0]?.outcome ?? 'missed'
  await locker.suspend('report')
  await locker.resume('report')
  const { tick: manual }: { tick: Date } = await locker.trigger('report')
  const locks: HeldLock[] = await locker.locks({ match: 'orders:*', limit: 10 })
  void [next, outcome, manual, (locks[0]?.fence ?? 0n) + 1n]
  const handed = await locker.lock('order:42', { ttl: 30_000, autoExtend: true })
  const handle: LockHandle = JSON.parse(JSON.stringify(handed.handoff()))
  const adopted: Lock = await locker.adopt(handle, { ttl: 30_000 })
  void [adopted.fence + 1n, handle.validUntil - Date.now(), handle.fence.length]
  // @ts-expect-error a handle's fence is decimal digits, JSON-safe
  void ({ ...handle, fence: 1n } satisfies LockHandle)
  const set: MultiLock = await locker.lockAll(['stock:a', 'stock:b'], { wait: 5_000, ttl: 10_000 })
  const [fenceA, fenceB]: readonly bigint[] = set.fences
  void [set.keys[0], fenceA, fenceB, set.signal.aborted, set.validUntil, await set.extend(), await set.release()]
  const moved: number = await locker.withLocks(['stock:b', 'stock:a'], (ctx: MultiTaskContext) => ctx.fences.length + ctx.keys.length, { wait: 5_000 })
  void moved
  const nested: bigint = await locker.withLock('k', () => locker.withLock('k', ({ fence }) => fence, { reentrant: true, wait: 10 }))
  const nestedTask: boolean = (await locker.snatchTask('k', () => 1, { reentrant: true })).ran
  void [nested, nestedTask, await locker.withLocks(['a', 'b'], () => 1, { reentrant: true })]
  const [hottest]: ContendedKey[] = locker.contention({ limit: 5, reset: true })
  void [hottest.key, hottest.waits + hottest.waitMs + hottest.timeouts]
  // @ts-expect-error contention's reset is a boolean
  locker.contention({ reset: 1 })
  const sharedOptions: SharedOptions<{ total: bigint }> = { resultTtl: 60_000, wait: 10_000, signal: AbortSignal.timeout(5_000) }
  const { total }: { total: bigint } = await locker.shared('report:2026-11', async ({ fence }) => ({ total: fence }), sharedOptions)
  const map: Map<string, number> = await locker.shared('map', () => new Map([['a', 1]]), {
    serialize: (m) => JSON.stringify([...m]),
    deserialize: (stored) => new Map(JSON.parse(stored.toString())),
  })
  void [total, map, new ResultError().code === 'ERR_SNATCH_RESULT']
  const idem: IdempotencyOptions = { required: true, scope: () => 'tenant-1' }
  const run: IdempotencyRun | undefined = undefined as IdempotencyRun | undefined
  void [idempotency(locker, idem), fastifyIdempotency, run?.fence, run?.signal.aborted, run?.validUntil]
  // redis-snatch/fence, with no driver's types: db is the user's pool or client, tx its transaction's connection.
  const fencedOptions: FencedOptions = { table: 'app.fences', signal: AbortSignal.timeout(1000), wait: 2000 }
  const fencedWrite: number = await locker.withLock('stock:42', ({ fence, signal }) =>
    fenced({}, 'stock:42', fence, async (tx: { query(text: string): Promise<unknown> }) => (await tx.query('SELECT 1'), 1), { ...fencedOptions, signal }),
  )
  const fromHandle: string = await fenced({}, 'stock:42', '1843000000000000', () => 'ok')
  // @ts-expect-error a fence is a bigint or its decimal string, never a Number
  void fenced({}, 'r', 1, () => 1)
  // @ts-expect-error options are the fence table, the signal and the wait
  void fenced({}, 'r', 1n, () => 1, { timeout: 5 })
  const ddl: string = fenceTableSql('postgres') + fenceTableSql('mysql', 'fences')
  // @ts-expect-error postgres or mysql
  void fenceTableSql('sqlite')
  const stale: StaleFenceError = new FenceStaleError('stock:42', 1n, 2n)
  void [fencedWrite, fromHandle, ddl, stale.code === 'ERR_SNATCH_STALE_FENCE', stale.resource, stale.fence + stale.current]
  const closing: CloseOptions = { timeout: 20_000 }
  await locker.close(closing)
  await locker.close({ drain: false })
  // @ts-expect-error the timeout is a number of ms
  await locker.close({ timeout: '20s' })
  await locker.close()

  try {
    await locker.snatchTask('k', () => 1)
  } catch (err) {
    if (err instanceof LockLostError) void (err.value as unknown)
    if (err instanceof SnatchError) {
      const code: string = err.code
      void code
    }
    const timeout: 'ERR_SNATCH_TIMEOUT' = new LockTimeoutError().code
    const none: 'ERR_SNATCH_NO_REPLICA' = new NoReplicaError().code
    if (err instanceof ReentrantError) void ([err.key, err.code] satisfies [string, 'ERR_SNATCH_REENTRANT'])
    void timeout, none, [RedisError, QuorumError, ClosedError, RunTimeoutError, RunReplacedError]
  }

  // @ts-expect-error the key must be a string
  await snatchTask(1, () => 1)
  // @ts-expect-error fn is required
  await locker.withLock('k')
  // @ts-expect-error snatchTask makes one attempt: no wait option
  await locker.snatchTask('k', () => 1, { wait: 10 })
  // @ts-expect-error ttl is a number
  createLocker({ ttl: '1000' })
  // @ts-expect-error reentrant is a boolean
  await locker.withLock('k', () => 1, { reentrant: 'yes' })
  // @ts-expect-error a sentinel needs the master's name
  createLocker({ sentinel: { urls: ['redis://10.0.0.1:26379'] } })
  // @ts-expect-error ca is PEM text or a Buffer
  createLocker({ tls: { ca: 5 } })
  // @ts-expect-error the cron expression is a string
  locker.schedule('report', 6, () => {})
  // @ts-expect-error concurrency is one of three policies
  locker.schedule('report', '* * * * *', () => {}, { concurrency: 'queue' })
  // @ts-expect-error the fence is read-only
  lock.fence = 2n
  // @ts-expect-error a Lock comes from a Locker, not from its constructor
  new Lock()

  const dashboardOptions: DashboardOptions = { actions: true }
  createServer(createDashboard(locker, dashboardOptions)).close()
  // @ts-expect-error the dashboard is of a Locker
  createDashboard({ actions: true })
  // @ts-expect-error actions is a boolean
  createDashboard(locker, { actions: 'yes' })

  const metricsOptions: MetricsHandlerOptions = { limit: 500 }
  createServer(createMetricsHandler(locker, metricsOptions)).close()
  // @ts-expect-error the metrics are of a Locker
  createMetricsHandler({ limit: 5 })
  // @ts-expect-error limit is a number
  createMetricsHandler(locker, { limit: '5' })
  // The application's prom-client registry: its types need no prom-client here (this project has none).
  const registerOptions: RegisterMetricsOptions = { fleet: true, name: 'orders' }
  const registry = {} as PromClientRegistry
  registerMetrics(locker, registry, registerOptions).disable()
  // @ts-expect-error fleet is a boolean
  registerMetrics(locker, registry, { fleet: 1 })
}
