// Type test (tsc --noEmit, strict): every public name of the API, and wrong calls rejected.
import {
  ClosedError,
  createLocker,
  Lock,
  Locker,
  LockLostError,
  LockTimeoutError,
  QuorumError,
  RedisError,
  snatchTask,
  SnatchError,
  type LockerOptions,
  type LockOptions,
  type ScheduledTask,
  type ScheduleOptions,
  type TickContext,
  type SnatchResult,
  type TaskContext,
  type WaitOptions,
} from '../..'

function scheduling(locker: Locker): ScheduledTask {
  const options: ScheduleOptions = { ttl: 60_000, timezone: 'Europe/Paris' }
  const task = locker.schedule('report:daily', '0 0 * * *', async ({ tick, fence, signal, key }: TickContext) => {
    const when: Date = tick
    void when, fence, signal, key
  }, options)
  task.on('run', ({ tick, fence, durationMs }) => void [tick.getTime(), fence + 1n, durationMs + 1])
  task.on('skip', ({ reason }) => {
    const r: 'taken' | 'overlap' = reason
    void r
  })
  task.on('error', (err, { tick }) => void [err, tick])
  // @ts-expect-error the cron expression is a string
  locker.schedule('n', 5, () => {})
  void task.stop()
  return task
}
void scheduling

async function usage(): Promise<void> {
  const options: LockerOptions = { url: 'redis://127.0.0.1:6379', prefix: 'app:', ttl: 10_000, commandTimeout: 500 }
  const redlock: LockerOptions = { urls: ['redis://a:6379', 'redis://b:6379', 'redis://c:6379'], driftFactor: 0.01 }
  const locker: Locker = createLocker(options)
  new Locker(redlock)

  const result: SnatchResult<number> = await locker.snatchTask('k', async ({ signal, fence, key }: TaskContext) => {
    signal.throwIfAborted()
    const f: bigint = fence
    return key.length + Number(f)
  })
  if (result.ran) {
    const value: number = result.value
    const fence: bigint = result.fence
    void value, fence
  } else {
    // @ts-expect-error no value when the task did not run
    void result.value
  }

  const lockOptions: LockOptions = { ttl: 1000, autoExtend: true, minHold: 500 }
  const waitOptions: WaitOptions = { ...lockOptions, wait: 2000 }
  const s: string = await locker.withLock('k', () => 'sync value', waitOptions)
  const top = await snatchTask('k', () => 1, lockOptions)
  void s, top

  const maybe: Lock | null = await locker.tryLock('k')
  const lock: Lock = await locker.lock('k', { wait: 100 })
  const fields: [string, string, bigint, AbortSignal, number] = [lock.key, lock.token, lock.fence, lock.signal, lock.validUntil]
  const extended: boolean = await lock.extend(5000)
  const released: boolean = await lock.release()
  await lock[Symbol.asyncDispose]()
  void maybe, fields, extended, released
  await locker.close()

  try {
    await locker.withLock('k', () => 1)
  } catch (err) {
    if (err instanceof LockLostError) void (err.value as unknown)
    if (err instanceof SnatchError) {
      const code: string = err.code
      void code
    }
    const classes = [RedisError, QuorumError, LockTimeoutError, ClosedError]
    void classes
  }

  // @ts-expect-error the key must be a string
  await locker.snatchTask(1, () => 1)
  // @ts-expect-error fn is required
  await locker.withLock('k')
  // @ts-expect-error snatchTask makes one attempt: no wait option
  await locker.snatchTask('k', () => 1, { wait: 10 })
  // @ts-expect-error ttl is a number
  createLocker({ ttl: '1000' })
  // @ts-expect-error the fence is read-only
  lock.fence = 2n
}

void usage
