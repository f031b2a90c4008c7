'use strict'
// The median, for combining repetitions.

/** The median of the finite numbers in `values`; NaN when there are none. */
function median(values) {
  const finite = values.filter(Number.isFinite).sort((a, b) => a - b)
  if (finite.length === 0) return NaN
  const mid = finite.length >> 1
  return finite.length % 2 ? finite[mid] : (finite[mid - 1] + finite[mid]) / 2
}

module.exports = { median }
