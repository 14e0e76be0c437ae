import { describe, expect, it } from 'vitest'
import {
  ConfigurationError,
  checkMoveEnds,
  InvalidArgumentError,
  type MoveProgress,
  moveShards,
} from '../src/index'

describe('moveShards', () => {
  it('fences then arrives each shard in order, reporting each before the next starts', async () => {
    const events: string[] = []
    const progress: MoveProgress[] = []
    const moved = await moveShards({
      shards: [3, 5],
      steps: {
        fence: async (shard) => {
          events.push(`fence ${shard}`)
          return { fencedAt: BigInt(shard * 100), resumed: shard === 5, tag: `t${shard}` }
        },
        arrive: async (shard, fenced) => {
          events.push(`arrive ${shard} ${fenced.tag}`)
          return { aheadMs: shard }
        },
      },
      onProgress: (p) => {
        events.push(`progress ${p.shard}`)
        progress.push(p)
      },
    })
    expect(events).toEqual([
      'fence 3',
      'arrive 3 t3',
      'progress 3',
      'fence 5',
      'arrive 5 t5',
      'progress 5',
    ])
    expect(moved).toEqual([
      { shard: 3, fencedAt: 300n, aheadMs: 3, resumed: false },
      { shard: 5, fencedAt: 500n, aheadMs: 5, resumed: true },
    ])
    expect(progress).toEqual([
      { done: 1, total: 2, shard: 3, fencedAt: 300n },
      { done: 2, total: 2, shard: 5, fencedAt: 500n },
    ])
  })

  it('runs both steps of a shard inside around, and stops at the first failure', async () => {
    const events: string[] = []
    const failure = new Error('lock')
    const run = moveShards({
      shards: [1, 2],
      steps: {
        fence: async (shard) => {
          if (shard === 2) throw failure
          return { fencedAt: 1n, resumed: false }
        },
        arrive: async () => ({ aheadMs: 0 }),
        around: async (shard, work) => {
          events.push(`lock ${shard}`)
          try {
            return await work()
          } finally {
            events.push(`unlock ${shard}`)
          }
        },
      },
    })
    await expect(run).rejects.toBe(failure)
    expect(events).toEqual(['lock 1', 'unlock 1', 'lock 2', 'unlock 2'])
  })
})

describe('checkMoveEnds', () => {
  it('defaults the lock timeout, bounds it, and refuses one handle for both ends', () => {
    const a = {}
    expect(checkMoveEnds({ from: a, to: {} }, 'server')).toBe(5000)
    expect(checkMoveEnds({ from: a, to: {}, lockTimeoutMs: 1 }, 'server')).toBe(1)
    expect(() => checkMoveEnds({ from: a, to: {}, lockTimeoutMs: 0 }, 'server')).toThrow(
      InvalidArgumentError,
    )
    expect(() => checkMoveEnds({ from: a, to: a }, 'database')).toThrow(ConfigurationError)
    expect(() => checkMoveEnds({ from: a, to: a }, 'database')).toThrow(/same database/)
  })
})
