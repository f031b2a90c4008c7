'use strict'

const errors = require('./lib/errors')
const { Locker } = require('./lib/locker')
const { Lock } = require('./lib/lock')
const { MultiLock } = require('./lib/multi-lock')

let defaultLocker = null

/** A new Locker; see LockerOptions. */
function createLocker(options) {
  return new Locker(options)
}

/** `snatchTask` on a default Locker, built on first use from REDIS_URL (else redis://127.0.0.1:6379). */
function snatchTask(key, fn, options) {
  defaultLocker ??= new Locker()
  return defaultLocker.snatchTask(key, fn, options)
}

module.exports = {
  Locker,
  Lock,
  MultiLock,
  createLocker,
  snatchTask,
  SnatchError: errors.SnatchError,
  RedisError: errors.RedisError,
  QuorumError: errors.QuorumError,
  LockTimeoutError: errors.LockTimeoutError,
  LockLostError: errors.LockLostError,
  ClosedError: errors.ClosedError,
  NoReplicaError: errors.NoReplicaError,
  RunTimeoutError: errors.RunTimeoutError,
  RunReplacedError: errors.RunReplacedError,
  ResultError: errors.ResultError,
  StaleFenceError: errors.StaleFenceError,
  ReentrantError: errors.ReentrantError,
}
