import type { EventEmitter } from 'node:events'

/** Options of a Locker. Times are milliseconds. */
export interface LockerOptions {
  /**
   * One Redis: 'redis://[user:pass@]host:port[/db]' or 'rediss://…' (TLS). Default: REDIS_URL, else
   * 'redis://127.0.0.1:6379'. 'memory://' (or 'memory://<name>'): an in-process store for tests, not distributed.
   */
  url?: string
  /** Redlock: independent Redis masters (odd count >= 3). A lock needs a majority. Exclusive with `url`. */
  urls?: string[]
  /** Prefix of every key this locker writes. Default 'snatch:'. */
  prefix?: string
  /** Default lease of a lock. Default 30000. */
  ttl?: number
  /** Time one Redis command may take before it counts as failed. Default 1000. */
  commandTimeout?: number
  /** Redlock clock-drift factor. Default 0.01. */
  driftFactor?: number
  /**
   * Names this process in every lock's stored value (`inspect()`'s `holder`) and in schedules' records and
   * registrations. Default `${os.hostname()}:${process.pid}`. 1 to 256 bytes, no control characters, not ending in `*`.
   */
  instanceId?: string
  /** Redis Cluster: seed nodes ('redis://' or 'rediss://'); the rest are discovered. Exclusive with url, urls, sentinel. */
  cluster?: string[]
  /**
   * Sentinel: the sentinels' URLs (their credentials, if any, in these URLs) and the monitored master's name. The
   * locker follows failovers. Exclusive with url, urls, cluster.
   */
  sentinel?: {
    /** The sentinels, 'redis://' or 'rediss://' (credentials in the URLs). */
    urls: string[]
    /** The monitored master's name (`sentinel monitor <name> …`). */
    name: string
  }
  /**
   * A client you already configured (an ioredis `Redis` or `Cluster`, a node-redis client or cluster): the locker
   * connects where and as it does (host and port or nodes, TLS, username and password, database, sentinels), over
   * connections of its own; it never uses, closes or waits on your client. A setting it cannot carry over (a Unix
   * socket, a NAT map, a TLS option other than those of `tls`, a node-redis sentinel) is ERR_SNATCH_INVALID_ARG naming
   * it. Exclusive with url, urls, cluster, sentinel, tls, username and password.
   */
  client?: RedisClientLike
  /** TLS for 'rediss://' URLs (and TLS cluster / sentinel nodes). PEM text or Buffers. */
  tls?: TlsOptions
  /** ACL user when the URL names none (the URL's wins when both are given). */
  username?: string
  /** Password when the URL gives none (the URL's wins when both are given). */
  password?: string
  /**
   * After acquiring, wait until this many replicas acknowledged the write (WAIT n commandTimeout); otherwise the
   * acquisition fails with RedisError and the key is released. Default 0.
   */
  waitReplicas?: number
  /**
   * How long a key's fence counter is kept after the key's last acquisition (ms). Default: 7 days. Fences still only
   * increase for a key after its counter expired: a new counter starts from the Redis server's clock.
   */
  fenceTtl?: number
  /**
   * Leases are renewed only while this process's event loop has turned within this many ms (renewal runs on a native
   * thread, so a long synchronous stretch keeps its leases; a loop stuck for good frees its keys within maxStall +
   * ttl, and its signals abort with LockLostError, `reason: 'stalled'`, once it turns again). Its schedules claim
   * nothing meanwhile. Default 30000; Infinity: renew whatever the loop does.
   */
  maxStall?: number
}

/** What `client` takes: an ioredis `Redis` or `Cluster` (`status`, `isCluster`), a node-redis client or cluster (`isOpen`). */
export type RedisClientLike =
  | {
      /** ioredis' connection status. */
      readonly status: string
      /** Whether it is an ioredis `Cluster`. */
      readonly isCluster: boolean
    }
  | {
      /** Whether the node-redis client is connected. */
      readonly isOpen: boolean
    }

/** TLS options of a Locker, as Node's `tls.connect` names them. */
export interface TlsOptions {
  /** Certificate authorities to trust instead of the default ones (the platform's, plus NODE_EXTRA_CA_CERTS). */
  ca?: string | Buffer | Array<string | Buffer>
  /** Client certificate (PEM), for servers that require one (mutual TLS). */
  cert?: string | Buffer
  /** The client certificate's private key (PEM). */
  key?: string | Buffer
  /** The name the server's certificate must be valid for (and SNI), instead of the URL's host. Not with `cluster`. */
  servername?: string
  /** Check the server's certificate. Default true. */
  rejectUnauthorized?: boolean
}

/** Options of one acquisition. */
export interface LockOptions {
  /** Lease; default: the locker's ttl. */
  ttl?: number
  /** Renew the lease (every ttl/3) while held; default true for snatchTask/withLock, false for tryLock/lock. */
  autoExtend?: boolean
  /** Keep the key at least this long after acquisition, even if released earlier; default 0. */
  minHold?: number
  /**
   * Inside the fn of a withLock, snatchTask or withLocks (or a decorated method) of this locker that holds the key
   * already: run fn under that lock (withLock, snatchTask; withLocks only when every key is held), with its fence; the
   * outer lease (its ttl, renewal and minHold) governs, and the lock is given back when the outermost call ends.
   * Without it, a waiting call there (withLock, lock, withLocks, lockAll) rejects {@link ReentrantError} at once, and a
   * one-attempt call answers as when anyone else holds the key. Never across processes or lockers: a key another
   * process or locker holds is waited for. A Lock from lock() never re-enters, nor is its key tracked. Default false.
   */
  reentrant?: boolean
}

/** Options of an acquisition that may wait. */
export interface WaitOptions extends LockOptions {
  /** How long to wait for the lock; default 0 (one attempt). */
  wait?: number
  /**
   * Wait in turn: after the fair waiters of the key that came before, in every process; a release wakes only the
   * first. Default false (waiters race for a release). Locks and semaphores on one Redis, Sentinel or Cluster.
   */
  fair?: boolean
}

/** A key waited for (`locker.contention()`). */
export interface ContendedKey {
  /** The key, as given. */
  key: string
  /** Acquisitions that found it held and waited (and got it, or timed out). */
  waits: number
  /** The time they waited, in all, in ms. */
  waitMs: number
  /** Those that did not get it within their `wait`. */
  timeouts: number
}

/** What a task run under a lock receives. */
export interface TaskContext {
  /**
   * Aborts (reason: LockLostError) as soon as the lease can no longer be guaranteed, before it expires. In
   * snatchTask/withLock and a schedule's fn it is a getter made on first read: `{ ...ctx }` does not copy it.
   */
  signal: AbortSignal
  /** Fencing token: strictly increasing per key across all holders. */
  fence: bigint
  /** The key the run holds, as given. */
  key: string
  /**
   * Date.now()-based end of the lease's guarantee (now once lost), as Lock.validUntil. Check it right before an act
   * that must not overlap another holder's: unlike the signal, it is right even just after the process was stopped
   * (SIGSTOP) or starved.
   */
  readonly validUntil: number
}

/** What lead()'s fn receives: a TaskContext whose fence is also the term. */
export interface LeaderContext extends TaskContext {
  /** The term: the fence of this leadership's lock, which rises with every term, across replicas. */
  term: bigint
}

/** Why a term ended: fn settled, resign(), stop() (or close()), the lease could not be kept, fn threw. */
export type RevokeReason = 'returned' | 'resigned' | 'stopped' | 'lost' | 'error'

/**
 * One replica's campaign (an EventEmitter): 'elected' when it becomes leader, 'revoked' when the term ends, 'error'
 * for fn's errors and failed campaigns (without a listener the first is logged; the campaign goes on).
 */
export interface Leadership extends EventEmitter {
  /** Whether this replica leads now (a term is under way). */
  readonly isLeader: boolean
  /** The current leader's instance id, as last seen (looked up each `retry` while campaigning), or null. */
  readonly leader: string | null
  /** Ends the term under way (fn's signal aborts) and campaigns again after `retry` ms. */
  resign(): Promise<void>
  /** Ends the term under way and stops campaigning; resolves once the campaign has stopped. */
  stop(): Promise<void>
  on(event: 'elected', listener: (info: { term: bigint; fence: bigint }) => void): this
  on(event: 'revoked', listener: (info: { term: bigint; reason: RevokeReason }) => void): this
  on(event: 'error', listener: (err: unknown) => void): this
  once(event: 'elected', listener: (info: { term: bigint; fence: bigint }) => void): this
  once(event: 'revoked', listener: (info: { term: bigint; reason: RevokeReason }) => void): this
  once(event: 'error', listener: (err: unknown) => void): this
}

/** Who leads a name, without campaigning (an EventEmitter of 'change' and 'error'); asks Redis twice a second. */
export interface LeaderObserver extends EventEmitter {
  /** The leader's instance id as last seen, or null without a leader. */
  readonly leader: string | null
  /** Stops watching. */
  close(): void
  /** `term`: the key's fence counter when the change was seen, at least the leader's term; null without a leader. */
  on(event: 'change', listener: (info: { leader: string | null; term: bigint | null }) => void): this
  on(event: 'error', listener: (err: unknown) => void): this
  once(event: 'change', listener: (info: { leader: string | null; term: bigint | null }) => void): this
  once(event: 'error', listener: (err: unknown) => void): this
}

/** lead()'s options: the lease, and `retry` (ms between a campaign's looks, and the pause after a term; 1000). */
export interface LeadOptions {
  /** The leadership lock's lease, ms (default: the locker's ttl), renewed while the term lasts. */
  ttl?: number
  /** Ms between a campaign's looks, and the pause after a term before campaigning again (default 1000). */
  retry?: number
}

/**
 * What snatchTask resolves: `{ ran: true, value, fence }` (fn ran here, under `fence`, and returned `value`), or
 * `{ ran: false }` (another replica held the key).
 */
export type SnatchResult<T> =
  | {
      /** fn ran here. */
      ran: true
      /** What fn returned. */
      value: T
      /** The fence fn ran under. */
      fence: bigint
    }
  | {
      /** Another replica held the key: fn did not run. */
      ran: false
    }

/** Acquires locks and runs tasks under them, on one Redis (`url`, `cluster` or `sentinel`) or a Redlock set (`urls`). */
export declare class Locker {
  constructor(options?: LockerOptions)
  /** One attempt. If this process wins the key, run fn, await it, release; else resolve { ran: false } without running fn. */
  snatchTask<T>(key: string, fn: (ctx: TaskContext) => T | Promise<T>, options?: LockOptions): Promise<SnatchResult<T>>
  /** Wait up to options.wait for the key, run fn, release. Resolves fn's value; rejects LockTimeoutError if not acquired. */
  withLock<T>(key: string, fn: (ctx: TaskContext) => T | Promise<T>, options?: WaitOptions): Promise<T>
  /** One attempt; null when the key is held by someone else. */
  tryLock(key: string, options?: LockOptions): Promise<Lock | null>
  /** Wait up to options.wait; rejects LockTimeoutError. */
  lock(key: string, options?: WaitOptions): Promise<Lock>
  /**
   * One caller across the fleet runs fn under the lock `key` and stores its value (or error) for `resultTtl` ms; the
   * other callers, now and within `resultTtl`, get that value without running fn. Waits up to `wait` (default 30 s)
   * for a round under way. Not on Redlock (ERR_SNATCH_INVALID_ARG).
   */
  shared<T>(key: string, fn: (ctx: TaskContext) => T | Promise<T>, options?: SharedOptions<T>): Promise<T>
  /**
   * Every key of `keys` or none, one Lock per key (its own fence), taken in a fixed order so that callers naming the
   * same keys in any order never deadlock; waits up to `options.wait` in all, then rejects LockTimeoutError naming
   * the first key not had in time. Renewed together with `autoExtend: true`.
   */
  lockAll(keys: readonly string[], options?: WaitOptions): Promise<MultiLock>
  /** lockAll, fn, release every lock: withLock for several keys. `ctx.fences[i]` is `keys[i]`'s fence. */
  withLocks<T>(keys: readonly string[], fn: (ctx: MultiTaskContext) => T | Promise<T>, options?: WaitOptions): Promise<T>
  /**
   * Continues a lock another process handed over (`lock.handoff()`): renewed here (unless `autoExtend: false`) with
   * `ttl` (default: the locker's); the original can no longer extend or release it. Rejects LockLostError (`reason:
   * 'handoff'`) when the key no longer holds the handle's token.
   */
  adopt(handle: LockHandle, options?: LockOptions): Promise<Lock>
  /** Cluster-safe cron: each occurrence of `cron` runs fn on exactly one replica. Throws on a bad expression or zone. */
  schedule(name: string, cron: string, fn: (ctx: TickContext) => unknown, options?: ScheduleOptions): ScheduledTask
  /** This replica runs the stored schedules whose handler is `name` (at most `maxRunning` at once here). Throws on
   *  Redlock. */
  handle(name: string, fn: (ctx: StoredTickContext) => unknown, options?: { maxRunning?: number }): Handler
  /** Creates or replaces stored schedule `id`, fleet-wide; its next occurrence follows the new spec. */
  upsertSchedule(id: string, spec: StoredScheduleSpec): Promise<StoredScheduleInfo>
  /** Removes stored schedule `id`: true when it existed; once this resolves no occurrence of it starts. */
  removeSchedule(id: string): Promise<boolean>
  /** Stored schedule `id`, or null. */
  getSchedule(id: string): Promise<StoredScheduleInfo | null>
  /** One page of the stored schedules (`limit` default 100, at most 1000); `cursor` null on the last page. */
  listSchedules(options?: { handler?: string; match?: string; limit?: number; cursor?: string | null }): Promise<{
    /** This page's schedules. */
    schedules: StoredScheduleInfo[]
    /** The `cursor` of the next page, or null after the last. */
    cursor: string | null
  }>
  /** A counting semaphore: at most `limit` holders of `key` at once, across every process (not on Redlock). */
  semaphore(key: string, limit: number): Semaphore
  /** A read-write lock: many readers or one writer of `key` at once, across every process (not on Redlock). */
  rwlock(key: string): ReadWriteLock
  /** Campaigns for leadership of `name`; runs fn while leader; campaigns again when the term ends. */
  lead(name: string, fn: (ctx: LeaderContext) => unknown, options?: LeadOptions): Leadership
  /** Watches who leads `name` without campaigning. */
  observe(name: string): LeaderObserver
  /**
   * The keys this locker's waiting calls (withLock, lock, withLocks, lockAll, a permit's or read-write lock's with
   * `wait`) waited for most since it was made, or since the last call with `reset: true` (which starts the count
   * again): `limit` of them (default 10), by total wait. Kept in the core in a table of at most 100 keys however many
   * keys wait (a key waited for a lot enters it and stays; one that enters counts from then), never sent anywhere;
   * per-key metrics only through the `keyLabel` options of redis-snatch/prometheus and redis-snatch/otel.
   */
  contention(options?: { limit?: number; reset?: boolean }): ContendedKey[]
  /** What Redis holds for `key` now: null when it is free. For dashboards and debugging. */
  inspect(key: string): Promise<null | Inspection>
  /** Deletes `key`'s lock whoever holds it (an operator's tool) and wakes its waiters; true if there was one. The
   *  holder's next extension is refused and its signal aborts. */
  forceRelease(key: string): Promise<boolean>
  /** Every schedule a live replica registered, fleet-wide (none needs to be registered in this process), by name. */
  schedules(): Promise<ScheduleInfo[]>
  /** A schedule's newest records, newest first (`limit` default 50). */
  history(name: string, options?: { limit?: number }): Promise<OccurrenceRecord[]>
  /** Every replica skips the schedule's occurrences (reason 'suspended') until `resume`. */
  suspend(name: string): Promise<void>
  /** The schedule runs again on every replica (undoes `suspend`). */
  resume(name: string): Promise<void>
  /** One run now, on exactly one live replica that registered `name` (excluded against its scheduled runs by the run
   *  lock); rejects NoReplicaError when none is live. */
  trigger(name: string): Promise<{
    /** The manual run's tick: when it was asked for. */
    tick: Date
  }>
  /** Locks held now under this locker's prefix (SCAN; each master on a cluster). `key` and `match` (a glob) are the
   *  names given to lock()/snatchTask(), without the prefix. `limit` default 1000. */
  locks(options?: { match?: string; limit?: number }): Promise<HeldLock[]>
  /**
   * Takes nothing new at once (new and waiting calls reject ClosedError, schedules claim nothing more, campaigns stop
   * and a leader steps down), lets the running fns finish, releases every lock still held, closes the connections.
   * Idempotent. `timeout`: how long the fns get, in ms (default Infinity): then their signals abort with ClosedError,
   * and a schedule's attempt is recorded 'interrupted' and run again at once by another replica; `drain: false`: no
   * time at all.
   */
  close(options?: CloseOptions): Promise<void>
}

/** Options of `Locker.close`. */
export interface CloseOptions {
  /** Whether the running fns may finish (default true); false: their signals abort at once. */
  drain?: boolean
  /** How long they may take to finish, in ms (default Infinity). */
  timeout?: number
}

/** One attempt of one occurrence of a schedule, as Redis keeps it (`history()`). */
export interface OccurrenceRecord {
  /** The scheduled occurrence (a manual run's: when it was asked for). */
  tick: Date
  /** 1 for the first. */
  attempt: number
  /** Why it ran: on time, late (a replica caught up after a gap), a retry, or a manual run. */
  why: 'on-time' | 'late' | 'retry' | 'manual'
  /** A manual run (`trigger`), or a retry of one. */
  manual: boolean
  /** Who ran it (null when missed). */
  instance: string | null
  /** The fence fn ran under (null when missed). */
  fence: bigint | null
  /** When fn was called (null when missed). */
  started: Date | null
  /** How long fn took (null while running, or when missed). */
  durationMs: number | null
  /**
   * How it came out: running, ok, failed (fn threw), timeout (past its `timeout`), lost (its lease), crashed (its
   * replica died), interrupted (its replica shut down, or its lease lapsed before fn was called: run again at once),
   * missed (did not run).
   */
  outcome: 'running' | 'ok' | 'failed' | 'timeout' | 'lost' | 'crashed' | 'interrupted' | 'missed'
  /** The error's message, at most 500 characters. */
  error?: string
  /** Why a missed occurrence did not run: 'deadline', 'overlap' or 'suspended'. */
  reason?: 'deadline' | 'overlap' | 'suspended'
  /** When the next attempt is due (a failed attempt with retries left). */
  retryAt?: Date
}

/** A schedule as its live replicas registered it (`schedules()`). */
export interface ScheduleInfo {
  /** The schedule's name. */
  name: string
  /** Its cron expression. */
  cron: string
  /** The IANA zone its expression is read in. */
  timezone: string
  /** Instance ids of the live replicas that registered it (none: orphaned). */
  replicas: string[]
  /** Whether `suspend` holds it (its occurrences are skipped). */
  suspended: boolean
  /** Its next occurrence, or null when there is none. */
  next: Date | null
  /** Its next occurrences (up to 3). */
  upcoming: Date[]
  /** The records of its attempts running now. */
  running: OccurrenceRecord[]
  /** The newest record of an attempt that is not running. */
  last: OccurrenceRecord | null
  /** When its newest ok attempt ended (its record written, on the Redis server's clock); null when none ever was. */
  lastSuccess: Date | null
  /** How its newest records (up to 50) came out: `failed` counts failed, timed out, lost and crashed attempts. */
  recent: {
    /** The records counted. */
    records: number
    /** Attempts that came out ok. */
    ok: number
    /** Attempts that failed, timed out, lost their lease or crashed. */
    failed: number
    /** Occurrences recorded missed. */
    missed: number
  }
  /**
   * Whether it does what it is for (the first that holds): 'orphaned' when no live replica registers it any more
   * (its records stay 7 days); 'stuck' when an attempt runs past its `timeout` or `maxRuntime`; 'missed' when its
   * newest finished occurrence was recorded missed (not while suspended) or an occurrence passed its
   * `startingDeadline` with nothing recorded; 'failing' when its newest finished attempt failed, timed out, lost its
   * lease or crashed; else 'ok'.
   */
  health: ScheduleHealth
}

/** A schedule's health (`ScheduleInfo.health`). */
export type ScheduleHealth = 'ok' | 'failing' | 'missed' | 'stuck' | 'orphaned'

/** A lock held now (`locks()`). */
export interface HeldLock {
  /** The key, without the prefix. */
  key: string
  /** The holder's instance id (null when its value does not say). */
  holder: string | null
  /** The lease left, in ms. */
  ttl: number
  /** The key's fence counter: the holder's fence, or above it once other attempts were made (each uses one up). */
  fence: bigint
}

/** A counting semaphore (`Locker.semaphore`); expiry is judged on the Redis server's clock. */
export interface Semaphore {
  /** The semaphore's key. */
  readonly key: string
  /** At most this many holders at once. */
  readonly limit: number
  /** Waits up to options.wait for a permit (a Lock); rejects LockTimeoutError. */
  acquire(options?: WaitOptions): Promise<Lock>
  /** One attempt: a permit, or null when `limit` are held. */
  tryAcquire(options?: LockOptions): Promise<Lock | null>
  /** Runs fn under a permit (renewed while it runs) and gives it back; fn's value, or LockLostError if lost. */
  withPermit<T>(fn: (ctx: TaskContext) => T | Promise<T>, options?: WaitOptions): Promise<T>
}

/**
 * A read-write lock (`Locker.rwlock`): many readers or one writer at once; each read or write lock is a Lock, its
 * expiry judged on the Redis server's clock. A writer that waits keeps new readers out (readers cannot starve it).
 */
export interface ReadWriteLock {
  /** The read-write lock's key. */
  readonly key: string
  /** Waits up to options.wait for a read lock; rejects LockTimeoutError. */
  read(options?: WaitOptions): Promise<Lock>
  /** Waits up to options.wait for the write lock; rejects LockTimeoutError. */
  write(options?: WaitOptions): Promise<Lock>
  /** One attempt: a read lock, or null while a writer holds the lock or waits for it. */
  tryRead(options?: LockOptions): Promise<Lock | null>
  /** One attempt: the write lock, or null while another writer or any reader holds it. */
  tryWrite(options?: LockOptions): Promise<Lock | null>
  /** Runs fn under a read lock (renewed while it runs) and releases it; fn's value, or LockLostError if lost. */
  withRead<T>(fn: (ctx: TaskContext) => T | Promise<T>, options?: WaitOptions): Promise<T>
  /** Runs fn under the write lock (renewed while it runs) and releases it; fn's value, or LockLostError if lost. */
  withWrite<T>(fn: (ctx: TaskContext) => T | Promise<T>, options?: WaitOptions): Promise<T>
}

/** What Redis holds for a locked key (`Locker.inspect`). */
export interface Inspection {
  /** The lease left, in ms (with Redlock: the least among the nodes that hold it). */
  ttl: number
  /** The key's fence counter: the holder's fence, or above it once other attempts were made (each uses one up). */
  fence: bigint
  /** How many hold it: 1 for a lock. */
  holders: number
  /** The holder's `instanceId` (null when its value does not say: a semaphore, or a lock taken by an older version). */
  holder: string | null
}

/**
 * Messages on Node's `diagnostics_channel` (`require('node:diagnostics_channel').subscribe(name, fn)`), published
 * only while someone subscribes. `redis-snatch:start`: a call starts, in the caller's async context; its message is
 * the `start` of the call's later messages.
 */
export interface StartMessage {
  /** The key of the call (a schedule's attempt: `name:tick`). */
  key: string
  /**
   * The Locker's method: 'withLock', 'snatchTask', 'lead' (a leader's campaign), 'tryLock', 'lock', 'tryAcquire',
   * 'acquire' (a permit), 'read', 'write', 'adopt', 'lockAll' (one start per key of a set, withLocks' too), 'shared';
   * 'schedule' for a schedule's attempt run here (with its fields below).
   */
  method: string
  /** The Locker whose call it is. */
  locker: Locker
  /** A schedule's attempt: the schedule's name. */
  schedule?: string
  /** A schedule's attempt: its occurrence. */
  tick?: Date
  /** A schedule's attempt: 1 for the first. */
  attempt?: number
  /** A schedule's attempt: why it runs. */
  why?: 'on-time' | 'late' | 'retry' | 'manual'
  /** A schedule's attempt: the fence it runs under. */
  fence?: bigint
}
/** `redis-snatch:lost`: a lease lost while held, `ms` held until then. */
export interface LeaseMessage {
  /** The lock's key (a schedule's occurrence: `name:tick`). */
  key: string
  /** The lease's fence. */
  fence: bigint
  /** Milliseconds: how long it was held, or waited for (see each message). */
  ms: number
  /** On `redis-snatch:lost`: 'stalled' when the lease lapsed because the event loop did not turn within maxStall. */
  reason?: 'stalled'
  /** The call's start message (undefined when no one listened to `redis-snatch:start` then). */
  start?: StartMessage
}
/**
 * On `redis-snatch:acquire`: a lock acquired or a task's lease taken, `ms` since the call (for a schedule's
 * occurrence: since its tick).
 */
export interface AcquireMessage extends LeaseMessage {
  /** Whether it was taken by a direct call (the direct connection: a one-attempt acquisition on one Redis or a Cluster). */
  direct: boolean
}
/** On `redis-snatch:release`: a lock or task ended, `ms` after it was acquired. */
export interface ReleaseMessage extends LeaseMessage {
  /** False when the lock was no longer ours (lost, or released before). */
  released: boolean
}
/** On `redis-snatch:busy`: a one-attempt call found the key held (`{ ran: false }`, null), `ms` after it was made. */
export interface BusyMessage {
  /** The key found held. */
  key: string
  /** Since the call was made. */
  ms: number
  /** The call's start message (undefined when no one listened to `redis-snatch:start` then). */
  start?: StartMessage
}
/** On `redis-snatch:error`: a call failed, `ms` after it was made. */
export interface ErrorMessage {
  /** The key of the call. */
  key: string
  /** A lock's release that failed: its fence. */
  fence?: bigint
  /** Since the call was made. */
  ms: number
  /** What the call rejected with. */
  error: Error
  /** The call's start message (undefined when no one listened to `redis-snatch:start` then). */
  start?: StartMessage
}
/** On `redis-snatch:attempt`: a schedule's attempt run here ended, as its record says. */
export interface AttemptMessage {
  /** The schedule's name. */
  schedule: string
  /** The occurrence. */
  tick: Date
  /** 1 for the first. */
  attempt: number
  /** Why it ran. */
  why: 'on-time' | 'late' | 'retry' | 'manual'
  /** The fence it ran under. */
  fence: bigint
  /** This replica's `instanceId`. */
  instance: string
  /** From its tick (plus the schedule's `jitter` offset for it, when it has one) to fn's call, in ms. */
  lagMs: number
  /** From fn's call to its settling, in ms. */
  durationMs: number
  /** How it ended, as its record says. */
  ending: 'ok' | 'failed' | 'timeout' | 'replaced' | 'lost' | 'interrupted'
  /** What it came to for the 'error' event, unless ok. */
  error?: unknown
  /** The attempt's start message (undefined when no one listened to `redis-snatch:start` then). */
  start?: StartMessage
}
/** On `redis-snatch:missed`: this replica recorded an occurrence of a schedule missed. */
export interface MissedMessage {
  /** The schedule's name. */
  schedule: string
  /** The occurrence missed. */
  tick: Date
  /** Why: past its startingDeadline, a later one came first, the previous still ran, or suspended. */
  reason: 'deadline' | 'superseded' | 'overlap' | 'suspended'
  /** The Locker of the replica that recorded it. */
  locker: Locker
}

/** Options of a schedule. */
export interface ScheduleOptions {
  /** Lease of each attempt; auto-extended while fn runs. Default: the locker's ttl. */
  ttl?: number
  /** IANA time zone name; default 'UTC'. */
  timezone?: string
  /** An occurrence that no replica ran at its tick still runs, once fleet-wide, if it can start within this many ms
   *  of its tick (only the latest missed one; older ones are recorded 'missed'). 0: never late. Default 900000 (15 min). */
  startingDeadline?: number
  /** Further attempts after fn rejected or threw (a dead runner's attempt is re-run regardless, up to 3 attempts in
   *  all). Default 0. */
  retries?: number
  /** Delay before the first retry in ms, doubled for each next one, with ±20% jitter. Default 1000. */
  retryDelay?: number
  /** While an earlier occurrence still runs: 'forbid' skips the new one (default), 'allow' runs both, 'replace' aborts
   *  the running attempt's signal (RunReplacedError) and runs the new one once it gave way, 'buffer' has the new one
   *  wait and run right after the running one (at most one waits, fleet-wide: a further one is skipped, reason
   *  'overlap', as with 'forbid'). */
  concurrency?: 'forbid' | 'allow' | 'replace' | 'buffer'
  /**
   * In ms, from 0 to 43200000 (12 hours): each occurrence starts at its tick plus an offset below this, the same on every
   * replica (derived from the schedule's name and the tick), so that many schedules sharing a tick do not all start in
   * the same millisecond. The occurrence is still its tick (`ctx.tick`, its record); `startingDeadline` counts from
   * its start. Default 0 (at its tick).
   */
  jitter?: number
  /** Per attempt, in ms: the signal aborts then (RunTimeoutError) and the attempt counts as failed. Default: none. */
  timeout?: number
  /**
   * An attempt running longer than this many ms makes the schedule's health 'stuck' (in `schedules()`, the dashboard,
   * Prometheus and `redis-snatch check`); nothing is aborted. Default: none (`timeout`, when set, counts instead).
   */
  maxRuntime?: number
  /** How many occurrence records Redis keeps for this schedule (1 to 10000). Default 50. */
  history?: number
}

/** Why an attempt of an occurrence runs. */
export type RunReason = 'on-time' | 'late' | 'retry' | 'manual'

/** What a scheduled task receives. */
export interface TickContext extends TaskContext {
  /** The scheduled occurrence (a manual run's: when it was asked for), not the local start time. */
  tick: Date
  /** 1 for the first attempt of the occurrence. */
  attempt: number
  /** Why it runs: on time, late, a retry, or a manual run. */
  why: RunReason
}

/** What a 'run' or 'error' event is about: an attempt run here. */
export interface AttemptInfo {
  /** The occurrence. */
  tick: Date
  /** 1 for the first. */
  attempt: number
  /** Why it ran. */
  why: RunReason
}

/** A running schedule (an EventEmitter). */
export interface ScheduledTask extends EventEmitter {
  /** The schedule's name. */
  readonly name: string
  /** No new occurrences; waits for the attempts running here. */
  stop(): Promise<void>
  on(event: 'run', listener: (info: AttemptInfo & { fence: bigint; durationMs: number }) => void): this
  on(event: 'skip', listener: (info: { tick: Date; reason: 'taken' | 'overlap' | 'suspended' }) => void): this
  on(event: 'error', listener: (err: unknown, info: AttemptInfo) => void): this
  once(event: 'run', listener: (info: AttemptInfo & { fence: bigint; durationMs: number }) => void): this
  once(event: 'skip', listener: (info: { tick: Date; reason: 'taken' | 'overlap' | 'suspended' }) => void): this
  once(event: 'error', listener: (err: unknown, info: AttemptInfo) => void): this
}

/** A stored schedule (`upsertSchedule`): exactly one of `cron`, `every` and `at`, and the options of `schedule()`. */
export interface StoredScheduleSpec extends ScheduleOptions {
  /** A cron expression, in `timezone`. */
  cron?: string
  /** Milliseconds between occurrences (>= 1000), counted from `startAt` (default: when first stored). */
  every?: number
  /** One occurrence at this time (a delayed one-off, kept across restarts). */
  at?: Date | number
  /** The cron's IANA zone, default 'UTC'. */
  timezone?: string
  /** The name the runners gave `locker.handle()`. */
  handler: string
  /** Given to fn as `ctx.data`: JSON, at most 8 KiB. */
  data?: unknown
  /** No occurrence before. */
  startAt?: Date | number
  /** No occurrence after. */
  endAt?: Date | number
  /** At most this many occurrences in all. */
  limit?: number
}

/** What a stored schedule's handler receives. */
export interface StoredTickContext extends TickContext {
  /** The stored schedule's id. */
  id: string
  /** Its `data` (null when none). */
  data: unknown
}

/** A stored schedule, as `getSchedule` and `listSchedules` tell it. */
export interface StoredScheduleInfo {
  /** The schedule's id (one namespace with code schedules' names). */
  id: string
  /** The handler its occurrences run on (`locker.handle(handler, fn)` on the runners). */
  handler: string
  /** Its cron expression, or null for `every` or `at`. */
  cron: string | null
  /** Its period in ms, or null for `cron` or `at`. */
  every: number | null
  /** Its one occurrence, or null for `cron` or `every`. */
  at: Date | null
  /** The IANA time zone its cron is read in. */
  timezone: string
  /** The `data` its occurrences get, as stored (JSON). */
  data: unknown
  /** No occurrence before this, or null. */
  startAt: Date | null
  /** No occurrence after this, or null. */
  endAt: Date | null
  /** How many occurrences it runs in all, or null for no limit. */
  limit: number | null
  /** Its next occurrence (null once finished). */
  next: Date | null
  /** Whether it is suspended fleet-wide (`locker.suspend(id)`). */
  suspended: boolean
  /** Occurrences dispatched so far. */
  runs: number
  /** The record of its latest occurrence, or null before the first. */
  last: OccurrenceRecord | null
  /** The records of its occurrences running now. */
  running: OccurrenceRecord[]
  /** As a code schedule's health; `orphaned` while no replica runs its handler. */
  health: 'ok' | 'failing' | 'missed' | 'stuck' | 'orphaned'
  /** Live replicas that run its handler. */
  runners: number
  /** When it finished (its `at` done, `limit` or `endAt` reached): it is removed a day later. */
  finished: Date | null
}

/** This replica running a handler of stored schedules (an EventEmitter: 'run' and 'error' as a ScheduledTask's, with
 *  the stored schedule's `id`). */
export interface Handler extends EventEmitter {
  /** The handler's name. */
  readonly name: string
  /** No new occurrences here; waits for those running here. */
  stop(): Promise<void>
}

/** A held lock. */
export declare class Lock {
  private constructor()
  /** The key, as given. */
  readonly key: string
  /** >= 128 random bits, unique per acquisition. */
  readonly token: string
  /** The fencing token: strictly increasing per key across all holders. */
  readonly fence: bigint
  /** Aborts when the lock is lost (reason: LockLostError), or released. */
  readonly signal: AbortSignal
  /** Date.now()-based estimate of the guaranteed end of the lease. */
  readonly validUntil: number
  /** false (and signal aborted) if it was no longer ours. */
  extend(ttl?: number): Promise<boolean>
  /** false if it was no longer ours; never deletes another owner's key. */
  release(): Promise<boolean>
  /**
   * Hands the lock over to another process (`locker.adopt(handle)`): no longer renewed nor released here (its signal
   * aborts). Throws LockLostError when it is no longer held here; a semaphore's permit or a read-write lock's cannot
   * be handed over (ERR_SNATCH_INVALID_ARG).
   */
  handoff(): LockHandle
  /** `await using lock = …`: released when the scope ends. */
  [Symbol.asyncDispose](): Promise<void>
}

/** Options of `locker.shared()`: the lock's (renewed by default), and the result's. */
export interface SharedOptions<T = unknown> extends WaitOptions {
  /** How long the value (or a stored error) is kept for later callers, ms (default 60 000). */
  resultTtl?: number
  /** Stops this caller's wait (it rejects with the signal's reason); a fn already running for it goes on. */
  signal?: AbortSignal
  /** The largest value stored, in bytes once serialized (default 1 MiB); a larger one is ERR_SNATCH_RESULT. */
  maxResultBytes?: number
  /** Keep fn's error for later callers too (default: only the callers waiting for that run get it). */
  storeErrors?: boolean
  /** Both or neither: how a value is stored (default JSON with bigint and Date; Buffers as bytes). */
  serialize?: (value: T) => string | Buffer
  /** What `serialize` made, back to a value (both or neither). */
  deserialize?: (stored: Buffer) => T
}

/** Several keys held together (`locker.lockAll()`): every one, or none. */
export declare class MultiLock {
  private constructor()
  /** The keys, in the order given. */
  readonly keys: readonly string[]
  /** Each key's fence, in the order of `keys`. */
  readonly fences: readonly bigint[]
  /** Aborts when any of the locks is lost (reason: its LockLostError), or when the set is released. */
  readonly signal: AbortSignal
  /** Date.now()-based estimate of the guaranteed end of the set (its earliest lease's). */
  readonly validUntil: number
  /** Every lease to `ttl` from now; false (and signal aborted) if any was no longer ours. */
  extend(ttl?: number): Promise<boolean>
  /** Releases every lock; false if any was no longer ours. */
  release(): Promise<boolean>
  /** `await using set = …`: released when the scope ends. */
  [Symbol.asyncDispose](): Promise<void>
}

/** What `withLocks`' fn receives: the set's signal, keys and fences; `key` and `fence` are the first key's. */
export interface MultiTaskContext extends TaskContext {
  /** The keys, in the order given. */
  readonly keys: readonly string[]
  /** Each key's fence, in the order of `keys`. */
  readonly fences: readonly bigint[]
  /** The first key. */
  key: string
}

/**
 * A lock handed over by `lock.handoff()`, JSON-safe. Whoever has the token can take the lock over: pass it as you
 * would the lock.
 */
export interface LockHandle {
  /** The lock's key (the adopter needs the same prefix). */
  key: string
  /** The lock's token (`lock.token`): the key must still hold it for `adopt` to take the lock. */
  token: string
  /** The fence, as decimal digits (a bigint is not JSON-safe). */
  fence: string
  /** Date.now()-based estimate of the end of the lease unless adopted (on the handing process's clock). */
  validUntil: number
}

/** snatchTask on a default Locker built on first use from REDIS_URL. */
export declare function snatchTask<T>(
  key: string,
  fn: (ctx: TaskContext) => T | Promise<T>,
  options?: LockOptions,
): Promise<SnatchResult<T>>

/** A new Locker. */
export declare function createLocker(options?: LockerOptions): Locker

/** Base of every error redis-snatch raises; `code` is stable. */
export declare class SnatchError extends Error {
  /** The stable code: ERR_SNATCH_… (the error table of the guide "Locks and snatchTask"). */
  readonly code: string
}
/** ERR_SNATCH_REDIS: connection refused / timed out / command failed; `cause` says why. */
export declare class RedisError extends SnatchError {
  /** Always 'ERR_SNATCH_REDIS'. */
  readonly code: 'ERR_SNATCH_REDIS'
}
/** ERR_SNATCH_QUORUM: Redlock could not reach a majority within the validity window. */
export declare class QuorumError extends SnatchError {
  /** Always 'ERR_SNATCH_QUORUM'. */
  readonly code: 'ERR_SNATCH_QUORUM'
}
/** ERR_SNATCH_TIMEOUT: `wait` elapsed without getting the lock (with redis-snatch/fence's `fenced()`: the fence row). */
export declare class LockTimeoutError extends SnatchError {
  /** Always 'ERR_SNATCH_TIMEOUT'. */
  readonly code: 'ERR_SNATCH_TIMEOUT'
}
/** ERR_SNATCH_LOCK_LOST: the lease was lost while held; `value` is what the task returned, if it returned. */
export declare class LockLostError extends SnatchError {
  /** Always 'ERR_SNATCH_LOCK_LOST'. */
  readonly code: 'ERR_SNATCH_LOCK_LOST'
  /** What fn returned, when it returned (withLock, snatchTask, shared). */
  readonly value?: unknown
  /**
   * 'stalled': not renewed because the event loop did not turn within `maxStall`; 'handoff': `adopt()` found the key
   * no longer holding the handle's token (expired, adopted already, or not the lock's token).
   */
  readonly reason?: 'stalled' | 'handoff'
}
/** ERR_SNATCH_RESULT: a shared result's value cannot be stored (not serializable, or over `maxResultBytes`). */
export declare class ResultError extends SnatchError {
  /** Always 'ERR_SNATCH_RESULT'. */
  readonly code: 'ERR_SNATCH_RESULT'
}
/**
 * ERR_SNATCH_STALE_FENCE: a fenced write (`fenced()` of redis-snatch/fence) found a higher fence recorded for its
 * resource, so a newer holder wrote since; nothing of it was committed.
 */
export declare class StaleFenceError extends SnatchError {
  /** Always 'ERR_SNATCH_STALE_FENCE'. */
  readonly code: 'ERR_SNATCH_STALE_FENCE'
  /** The resource the fence guards. */
  readonly resource: string
  /** The write's fence. */
  readonly fence: bigint
  /** The higher fence recorded for the resource. */
  readonly current: bigint
  /** A stale `fence` of `resource`, below `current`. */
  constructor(resource: string, fence: bigint, current: bigint)
}
/**
 * ERR_SNATCH_REENTRANT: a waiting call (withLock, lock, withLocks, lockAll) made inside the fn of a withLock, snatchTask or
 * withLocks of the same locker that holds its key: it would wait for itself, so it is refused at once (pass
 * `reentrant: true` to run under the held lock). Also a reentrant withLocks whose keys are held only in part: taking
 * the free ones while one is held out of order could deadlock.
 */
export declare class ReentrantError extends SnatchError {
  /** Always 'ERR_SNATCH_REENTRANT'. */
  readonly code: 'ERR_SNATCH_REENTRANT'
  /** The key the calling context holds. */
  readonly key: string
}
/** ERR_SNATCH_CLOSED: the locker was closed. */
export declare class ClosedError extends SnatchError {
  /** Always 'ERR_SNATCH_CLOSED'. */
  readonly code: 'ERR_SNATCH_CLOSED'
}
/** ERR_SNATCH_NO_REPLICA: `trigger()` found no live replica that registered the schedule. */
export declare class NoReplicaError extends SnatchError {
  /** Always 'ERR_SNATCH_NO_REPLICA'. */
  readonly code: 'ERR_SNATCH_NO_REPLICA'
}
/** ERR_SNATCH_RUN_TIMEOUT: a schedule's attempt ran past its `timeout` (its signal's reason). */
export declare class RunTimeoutError extends SnatchError {
  /** Always 'ERR_SNATCH_RUN_TIMEOUT'. */
  readonly code: 'ERR_SNATCH_RUN_TIMEOUT'
}
/** ERR_SNATCH_REPLACED: a later occurrence replaced a schedule's running attempt (its signal's reason). */
export declare class RunReplacedError extends SnatchError {
  /** Always 'ERR_SNATCH_REPLACED'. */
  readonly code: 'ERR_SNATCH_REPLACED'
}
