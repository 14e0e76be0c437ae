import { describe, expect, it } from 'vitest'
import { warmupRounds } from '../src/routed.ts'

/** Writes of each side in the warm-up: two slices a round. */
const writesOfEachSide = (rows: number, times: number, env: Record<string, string> = {}) =>
  warmupRounds(rows, times, env) * 2 * times

describe('warmupRounds', () => {
  it('gives each side past 3000 single-row writes, the calls after which V8 optimizes a function', () => {
    expect(writesOfEachSide(1, 150)).toBeGreaterThanOrEqual(4000)
    expect(writesOfEachSide(1, 300)).toBeGreaterThanOrEqual(4000)
    expect(warmupRounds(1, 150, {})).toBe(14)
  })

  it('keeps WARMUP rounds when the slices are long, and 1000 writes of 1000 rows', () => {
    expect(warmupRounds(1, 3000, {})).toBe(3)
    expect(warmupRounds(1000, 50, {})).toBe(10)
    expect(warmupRounds(1000, 4, {})).toBe(125)
  })

  it('takes WARMUP and WARMUP_WRITES from the environment', () => {
    expect(warmupRounds(1000, 4, { WARMUP: '5', WARMUP_WRITES: '0' })).toBe(5)
    expect(warmupRounds(1, 150, { WARMUP_WRITES: '3000' })).toBe(10)
    expect(warmupRounds(1, 150, { WARMUP: '20' })).toBe(20)
  })
})
