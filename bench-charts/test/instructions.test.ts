import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { countsOf, mainThreadDumps } from '../src/instructions.ts'
import type { Slice } from '../src/routed.ts'

const slice = (side: string, round: number, writes = 10): Slice => ({
  side,
  shape: '1 row',
  round,
  writes,
  from: 0,
  to: 0,
  cpuMs: 0,
  userMs: 0,
  systemMs: 0,
  threadMs: 0,
})

describe('instruction counts of a routed bench', () => {
  it("reads the main thread's count of each dump, and only the main thread's", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'instructions-test-'))
    try {
      const dump = (name: string, total: number) =>
        writeFile(join(dir, name), `version: 1\ncreator: callgrind-3.19.0\nsummary: ${total}\n`)
      await dump('cg-01', 900)
      await dump('cg.1-01', 5)
      await dump('cg.2-01', 1000)
      await dump('cg.2-02', 77) // another thread: not counted
      await dump('other.2-01', 13) // another run's file
      expect(await mainThreadDumps(dir, 'cg')).toEqual(
        new Map([
          [0, 900],
          [1, 5],
          [2, 1000],
        ]),
      )
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('gives slice k dump 2k + 2, leaves the warm-up out, and divides per round and write', () => {
    // Round -1 (warm-up) R D D R, round 0 D R R D, round 1 R D D R.
    const slices = [
      ...['router', 'direct', 'direct', 'router'].map((side) => slice(side, -1)),
      ...['direct', 'router', 'router', 'direct'].map((side) => slice(side, 0)),
      ...['router', 'direct', 'direct', 'router'].map((side) => slice(side, 1)),
    ]
    const dumps = new Map<number, number>()
    // Between slices (odd dumps) a lot, so that a shifted mapping shows.
    for (let k = 0; k < 2 * slices.length + 2; k++) dumps.set(k, 1e9)
    const perSlice = [50, 50, 50, 50, 100, 110, 110, 100, 120, 100, 100, 120]
    perSlice.forEach((count, k) => {
      dumps.set(2 * k + 2, count)
    })
    const { '1 row': counts } = countsOf(slices, dumps)
    expect(counts).toEqual({
      rounds: 2,
      writesPerSlice: 10,
      perWrite: { router: 11.5, direct: 10 },
      ratio: { median: 1.15, min: 1.1, max: 1.2 },
      perRound: { router: [11, 12], direct: [10, 10] },
    })
  })

  it('refuses a run of two benches, whose rounds would be mixed', () => {
    const once = ['router', 'direct', 'direct', 'router'].map((side) => slice(side, 0))
    const dumps = new Map(Array.from({ length: 20 }, (_, k) => [k, 1] as const))
    expect(() => countsOf([...once, ...once], dumps)).toThrow(/more than four slices/)
  })

  it('refuses a run with a slice that has no dump', () => {
    expect(() => countsOf([slice('router', 0)], new Map([[1, 5]]))).toThrow(/slice 0/)
  })
})
