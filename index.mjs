// ES module entry: the CommonJS module's exports under the same names (one instance, so `instanceof` works across
// both). scripts/pack-test.js checks that this list matches index.js exactly.
import cjs from './index.js'

export const {
  Locker,
  Lock,
  MultiLock,
  createLocker,
  snatchTask,
  SnatchError,
  RedisError,
  QuorumError,
  LockTimeoutError,
  LockLostError,
  ClosedError,
  NoReplicaError,
  RunTimeoutError,
  RunReplacedError,
  ResultError,
  StaleFenceError,
  ReentrantError,
} = cjs
