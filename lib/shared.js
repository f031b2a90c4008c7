'use strict'
// Shared results (`locker.shared`): how a value or an error becomes the bytes stored in Redis and back, and the
// options. The rounds themselves (who runs, who waits, what is stored) are native (lock/shared.rs).

const errors = require('./errors')
const { ResultError, invalidArg } = errors
const { LIMITS } = require('./native')
const { checkType, lockInit, positiveOption, snapshot } = require('./options')

/** The first byte of a payload: how the rest is encoded. */
const JSON_VALUE = 0x6a // 'j': JSON, with bigints and dates marked
const BYTES = 0x62 // 'b': a Buffer or Uint8Array, as it is
const UNDEFINED = 0x75 // 'u'
const CUSTOM = 0x63 // 'c': the caller's serialize()
/** The key that marks a bigint or a Date in the JSON. */
const MARK = '$redis-snatch'

/** Checks shared()'s options: the lock's, and the result's. */
function sharedOptions(options) {
  const names = ['ttl', 'minHold', 'autoExtend', 'fair', 'resultTtl', 'wait', 'signal', 'maxResultBytes', 'storeErrors', 'serialize', 'deserialize']
  const o = snapshot('options', options ?? {}, names)
  checkType('storeErrors', o.storeErrors, 'boolean')
  checkType('serialize', o.serialize, 'function')
  checkType('deserialize', o.deserialize, 'function')
  if ((o.serialize === undefined) !== (o.deserialize === undefined)) {
    throw invalidArg(TypeError, 'serialize and deserialize go together: give both or neither')
  }
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw invalidArg(TypeError, 'signal must be an AbortSignal')
  const resultTtl = positiveOption('resultTtl', o.resultTtl, LIMITS.defaultResultTtlMs)
  const maxResultBytes = positiveOption('maxResultBytes', o.maxResultBytes, LIMITS.defaultMaxResultBytes)
  const wait = o.wait === undefined ? LIMITS.defaultSharedWaitMs : o.wait
  const lock = lockInit({ ttl: o.ttl, minHold: o.minHold, autoExtend: o.autoExtend ?? true, fair: o.fair, wait }, { canWait: true })
  return { lock, resultTtl, maxResultBytes, wait, signal: o.signal, storeErrors: o.storeErrors ?? false, serialize: o.serialize, deserialize: o.deserialize }
}

/** The payload of fn's value; ResultError when it cannot be serialized or is over `maxResultBytes`. */
function encodeValue(value, { serialize, maxResultBytes }) {
  let payload
  try {
    if (serialize) payload = tagged(CUSTOM, serialize(value))
    else if (value === undefined) payload = Buffer.from([UNDEFINED])
    else if (value instanceof Uint8Array) payload = tagged(BYTES, value)
    else payload = tagged(JSON_VALUE, JSON.stringify(value, marked))
  } catch (err) {
    throw new ResultError(`the value cannot be stored: ${err?.message ?? err}`, { cause: err })
  }
  if (payload === null) throw new ResultError('the value cannot be stored: serialize() returned neither a string nor a Buffer')
  if (payload.length - 1 > maxResultBytes) {
    throw new ResultError(`the value takes ${payload.length - 1} bytes, over maxResultBytes (${maxResultBytes})`)
  }
  return payload
}

/** `tag` then `data` (a string, as UTF-8, or bytes); null for anything else. */
function tagged(tag, data) {
  if (typeof data === 'string') return Buffer.concat([Buffer.from([tag]), Buffer.from(data, 'utf8')])
  if (data instanceof Uint8Array) return Buffer.concat([Buffer.from([tag]), data])
  return null
}

/** JSON.stringify's replacer: bigints and dates marked (a Date has become a string by its toJSON before this). */
function marked(key, value) {
  const raw = this[key]
  if (typeof raw === 'bigint') return { [MARK]: 'bigint', value: raw.toString() }
  if (raw instanceof Date) return { [MARK]: 'date', value: raw.toISOString() }
  return value
}

/** JSON.parse's reviver of `marked`. */
function unmarked(_key, value) {
  if (value !== null && typeof value === 'object' && typeof value[MARK] === 'string' && Object.keys(value).length === 2) {
    if (value[MARK] === 'bigint') return BigInt(value.value)
    if (value[MARK] === 'date') return new Date(value.value)
  }
  return value
}

/** The value a payload holds. */
function decodeValue(payload, { deserialize }) {
  const data = payload.subarray(1)
  switch (payload[0]) {
    case UNDEFINED:
      return undefined
    case BYTES:
      return Buffer.from(data)
    case CUSTOM:
      return deserialize(Buffer.from(data))
    default:
      return JSON.parse(data.toString('utf8'), unmarked)
  }
}

/** The payload of fn's error: its class's name, `code` and message. */
function encodeError(err) {
  const described = err instanceof Error ? { name: err.name, message: err.message, code: /** @type {any} */ (err).code } : { name: 'Error', message: String(err) }
  if (typeof described.code !== 'string') delete described.code
  return Buffer.from(JSON.stringify(described), 'utf8')
}

/** The built-in error classes an error is told again as (their constructors take the message first). */
const BUILT_IN = [Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError]
/** Ours: every error class lib/errors.js exports. */
const OURS = /** @type {Array<typeof errors.SnatchError>} */ (
  Object.values(errors).filter((v) => v === errors.SnatchError || (typeof v === 'function' && v.prototype instanceof errors.SnatchError))
)

/** The error a payload describes: of the same class when it is ours or a built-in one, with its `code` and message. */
function decodeError(payload) {
  const { name, message, code } = JSON.parse(payload.toString('utf8'))
  const ours = OURS.find((Class) => Class.name === name)
  const builtIn = BUILT_IN.find((Class) => Class.name === name) ?? null
  let err
  if (ours) {
    err = new Error(message)
    Object.setPrototypeOf(err, ours.prototype)
    err.name = name
  } else {
    err = new (builtIn ?? Error)(message)
    if (!builtIn) err.name = name
  }
  if (code !== undefined) Object.defineProperty(err, 'code', { value: code, enumerable: true })
  return err
}

module.exports = { sharedOptions, encodeValue, decodeValue, encodeError, decodeError }
