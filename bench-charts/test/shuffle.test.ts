import { describe, expect, it } from 'vitest'
import { shuffled } from '../src/shuffle.ts'

describe('shuffled', () => {
  it('gives the orders the benchmarks have always run (pinned), the same for the same seed', () => {
    const modes = [0, 1, 2, 3, 4]
    expect([0, 1, 2, 3].map((seed) => shuffled(modes, seed))).toEqual([
      [4, 2, 3, 0, 1],
      [4, 2, 1, 0, 3],
      [2, 4, 0, 1, 3],
      [2, 4, 1, 0, 3],
    ])
    // The seed is read as an unsigned 32-bit integer.
    expect(shuffled(modes, 2 ** 32 + 1)).toEqual(shuffled(modes, 1))
    expect(modes).toEqual([0, 1, 2, 3, 4])
  })

  it('is a permutation, and over many seeds each item follows each other about equally often', () => {
    const modes = ['a', 'b', 'c', 'd', 'e']
    const follows = new Map<string, number>()
    const seeds = 20_000
    for (let seed = 1; seed <= seeds; seed++) {
      const order = shuffled(modes, seed)
      expect([...order].sort()).toEqual(modes)
      for (let i = 1; i < order.length; i++) {
        const pair = `${order[i - 1]}>${order[i]}`
        follows.set(pair, (follows.get(pair) ?? 0) + 1)
      }
    }
    // 20 ordered pairs share 4 adjacencies per order: 4000 each when uniform.
    expect(follows.size).toBe(20)
    for (const count of follows.values()) {
      expect(count).toBeGreaterThan(3600)
      expect(count).toBeLessThan(4400)
    }
    expect(shuffled([], 7)).toEqual([])
    expect(shuffled(['only'], 7)).toEqual(['only'])
  })
})
