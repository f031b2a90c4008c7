'use strict'
// The Locker's tables by id written on every call (its operations, runs and locks in flight): one array of values by
// open addressing (linear probing on the id), its ids in a Float64Array. Not a Map: V8 keeps a Map's entries in a
// hash table that it replaces (rehashes) every so many additions when entries come and go; once a table has reached
// the old generation (a busy moment is enough), every replacement is made there too, and each table replaced keeps
// the entries it held (the calls then in flight) for young-generation collections until the next full collection. So
// every call's objects (its promises, its Run, what a tracer hung on it) outlived scavenges and were promoted: with
// OpenTelemetry on, 150-200 MB in 3.6 s at withfn c=50, against ~8 MB with this table. Here a deleted entry's value is
// cleared at once, and when the arrays are replaced (once emptied slots pile up) the old ones are cleared too.

/** The fewest slots (a power of 2). */
const MIN_CAPACITY = 64
/** A slot's id once its entry is deleted: probes go on past it, and `set` may reuse it. */
const DELETED = -1

/** Values by integer id (1 to 2^32 - 1): the part of Map's interface the Locker and its runs use. */
class IdTable {
  /** Each slot's id (0: empty, DELETED: emptied). */
  #ids
  /** Each slot's value (undefined when empty or emptied). */
  #values
  #mask
  #size = 0
  /** How many slots are DELETED. */
  #deleted = 0

  constructor() {
    this.#allocate(MIN_CAPACITY)
  }

  #allocate(capacity) {
    this.#ids = new Float64Array(capacity)
    this.#values = new Array(capacity).fill(undefined)
    this.#mask = capacity - 1
  }

  /** How many ids have a value. */
  get size() {
    return this.#size
  }

  /** The slot of `id`, or -1. */
  #find(id) {
    const ids = this.#ids
    const mask = this.#mask
    for (let i = id & mask; ; i = (i + 1) & mask) {
      const at = ids[i]
      if (at === id) return i
      if (at === 0) return -1
    }
  }

  has(id) {
    return this.#find(id) !== -1
  }

  get(id) {
    const i = this.#find(id)
    return i === -1 ? undefined : this.#values[i]
  }

  set(id, value) {
    const found = this.#find(id)
    if (found !== -1) {
      this.#values[found] = value
      return this
    }
    // Emptied slots count as used: at most 3/4 of the slots used, so that a probe meets an empty one soon.
    if ((this.#size + this.#deleted + 1) * 4 > this.#ids.length * 3) this.#rebuild()
    const ids = this.#ids
    const mask = this.#mask
    let i = id & mask
    while (ids[i] > 0) i = (i + 1) & mask
    if (ids[i] === DELETED) this.#deleted--
    ids[i] = id
    this.#values[i] = value
    this.#size++
    return this
  }

  /** New arrays, without emptied slots, of 4 slots per entry at least (so that rebuilds are rare). */
  #rebuild() {
    const ids = this.#ids
    const values = this.#values
    let capacity = MIN_CAPACITY
    while (capacity < (this.#size + 1) * 4) capacity *= 2
    this.#allocate(capacity)
    this.#deleted = 0
    const mask = this.#mask
    for (let j = 0; j < ids.length; j++) {
      if (ids[j] <= 0) continue
      let i = ids[j] & mask
      while (this.#ids[i] !== 0) i = (i + 1) & mask
      this.#ids[i] = ids[j]
      this.#values[i] = values[j]
    }
    // The old arrays may be in the old generation: cleared, they keep nothing young alive.
    values.fill(undefined)
  }

  /** Whether `id` had a value; its slot is emptied (its value no longer referenced). */
  delete(id) {
    const i = this.#find(id)
    if (i === -1) return false
    this.#ids[i] = DELETED
    this.#values[i] = undefined
    this.#size--
    this.#deleted++
    return true
  }

  /** The values, in no particular order (a snapshot: the table may change while they are used). */
  values() {
    const out = []
    const ids = this.#ids
    for (let i = 0; i < ids.length; i++) {
      if (ids[i] > 0) out.push(this.#values[i])
    }
    return out[Symbol.iterator]()
  }
}

module.exports = { IdTable }
