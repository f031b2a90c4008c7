'use strict'
// The chaos suite's audit (chaos/checker.js), on made-up sections: what it must count as an overlap or a fence out
// of order, and what it must not (readers of a read-write lock holding at once).

const { check } = require('../../chaos/checker')

/** A section of `key` acting from `enter` to `last` (ns), with `fence`; `shared` for a reader. */
const section = (key, enter, last, fence, shared = false) => ({
  key,
  worker: 1,
  enter: BigInt(enter),
  last: BigInt(last),
  fence: BigInt(fence),
  shared,
})

test('exclusive sections: one that starts before the last act of another overlaps; fences must rise by start', () => {
  expect(check([section('a', 0, 10, 1), section('a', 11, 20, 2), section('b', 5, 30, 1)])).toMatchObject({ overlaps: 0, fenceViolations: 0 })
  expect(check([section('a', 0, 10, 1), section('a', 10, 20, 2)])).toMatchObject({ overlaps: 1, fenceViolations: 0 })
  expect(check([section('a', 0, 10, 2), section('a', 11, 20, 2)])).toMatchObject({ overlaps: 0, fenceViolations: 1 })
})

test('readers may hold at once and take fences in any order; a writer may overlap none, and its fence tops theirs', () => {
  const readers = [section('k', 0, 10, 3, true), section('k', 2, 12, 2, true), section('k', 4, 8, 4, true)]
  expect(check(readers)).toMatchObject({ overlaps: 0, fenceViolations: 0 })
  expect(check([...readers, section('k', 13, 20, 5)])).toMatchObject({ overlaps: 0, fenceViolations: 0 })
  expect(check([...readers, section('k', 11, 20, 5)])).toMatchObject({ overlaps: 1 }) // a reader acted until 12
  expect(check([...readers, section('k', 13, 20, 4)])).toMatchObject({ fenceViolations: 1 }) // not above reader 4
  // A reader inside a writer's section, and one after it with a lower fence.
  const writer = section('k', 100, 110, 10)
  expect(check([writer, section('k', 105, 120, 11, true)])).toMatchObject({ overlaps: 1 })
  expect(check([writer, section('k', 111, 120, 9, true)])).toMatchObject({ overlaps: 0, fenceViolations: 1 })
})

test('the rest of a section handed over keeps its fence; it may overlap none, and a lower fence is out of order', () => {
  const adopted = (enter, last, fence) => ({ ...section('h', enter, last, fence), adopted: true })
  expect(check([section('h', 0, 10, 5), adopted(11, 20, 5), section('h', 21, 30, 6)])).toMatchObject({ overlaps: 0, fenceViolations: 0 })
  expect(check([section('h', 0, 10, 5), adopted(9, 20, 5)])).toMatchObject({ overlaps: 1 })
  expect(check([section('h', 0, 10, 5), adopted(11, 20, 4)])).toMatchObject({ fenceViolations: 1 })
  expect(check([section('h', 0, 10, 5), adopted(11, 20, 5), section('h', 21, 30, 5)])).toMatchObject({ fenceViolations: 1 })
})

test('a section cut before its first act did nothing under its lock: neither an overlap nor a fence out of order', () => {
  // Its process stopped between the lock's last check and fn's first one, and resumed after another held the key.
  const unacted = (enter, fence) => ({ ...section('s', enter, enter, fence), cut: true })
  expect(check([section('s', 0, 10, 7), unacted(5, 6), unacted(11, 6)])).toMatchObject({ overlaps: 0, fenceViolations: 0 })
  // One act is enough to count: the same sections acting once are an overlap and a fence out of order.
  const acted = (enter, fence) => ({ ...section('s', enter, enter + 1, fence), cut: true })
  expect(check([section('s', 0, 10, 7), acted(5, 8)])).toMatchObject({ overlaps: 1 })
  expect(check([section('s', 0, 10, 7), acted(11, 6)])).toMatchObject({ fenceViolations: 1 })
  // A killed section (not cut) ends at the kill and counts, acts or not.
  expect(check([section('s', 0, 10, 7), section('s', 11, 11, 6)])).toMatchObject({ fenceViolations: 1 })
})
