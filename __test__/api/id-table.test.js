'use strict'
// lib/id-table.js, the Locker's tables of its operations, runs and locks in flight: the same answers as a Map.

const { IdTable } = require('../../lib/id-table')

/** A deterministic generator of integers below `n`. */
function numbers(seed) {
  let state = seed
  return (n) => {
    state = (state * 1103515245 + 12345) % 2147483648
    return state % n
  }
}

test.each([
  ['a window of ids, as the locker gives them', 300],
  ['ids far apart', 100000],
])('answers as a Map under sets and deletes: %s', (_, spread) => {
  const table = new IdTable()
  const map = new Map()
  const next = numbers(spread)
  // Ids that share a slot at the first capacities, and the ends of the id range (the core's own ids go to 2^32 - 1).
  const edges = [1, 2, 63, 64, 65, 128, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1]
  for (let i = 0; i < 5000; i++) {
    const id = next(3) === 0 ? edges[next(edges.length)] : 1 + next(spread)
    const op = next(4)
    if (op < 2) {
      expect(table.set(id, i)).toBe(table)
      map.set(id, i)
    } else if (op === 2) {
      expect(table.delete(id)).toBe(map.delete(id))
    }
    expect([table.get(id), table.has(id), table.size]).toEqual([map.get(id), map.has(id), map.size])
  }
  const sorted = (values) => [...values].sort((a, b) => a - b)
  expect(sorted(table.values())).toEqual(sorted(map.values()))
})

test('values() may be iterated while its entries are deleted', () => {
  const table = new IdTable()
  for (let id = 1; id <= 100; id++) table.set(id, id)
  const seen = []
  for (const value of table.values()) {
    seen.push(value)
    table.delete(value)
  }
  expect(seen.sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1))
  expect(table.size).toBe(0)
  expect([...table.values()]).toEqual([])
})
