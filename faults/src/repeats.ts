// No imports: the global setup (which runs without the source condition) uses this file.

/** Sorted copy; returns how many values equal their predecessor (repeats), and a few of them. */
export function countRepeats(values: BigUint64Array): { repeats: number; examples: bigint[] } {
  const sorted = values.slice().sort()
  let repeats = 0
  const examples: bigint[] = []
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i] === sorted[i - 1]) {
      repeats++
      if (examples.length < 10) examples.push(sorted[i]!)
    }
  }
  return { repeats, examples }
}
