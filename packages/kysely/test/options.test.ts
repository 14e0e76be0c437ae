/**
 * shardedIds() checks its options and every table's rule when it is called, before any query:
 * typed errors whose messages say what to write instead. And assign(): IDs before the INSERT,
 * one call per shard, from any source.
 */
import { asAsync, CountingSource, testSharding } from '@shardflake/conformance'
import {
  ConfigurationError,
  type IdSource,
  InProcessSource,
  InvalidArgumentError,
  InvalidShardRuleError,
  MisplacedIdError,
  MissingShardKeyError,
  ShardOutOfRangeError,
} from '@shardflake/core'
import { afterAll, describe, expect, it } from 'vitest'
import { shardedIds } from '../src'

const sharding = testSharding()
const inProcess = new InProcessSource({ sharding, shards: 'all' })
afterAll(() => inProcess.close())

describe('shardedIds() options', () => {
  const make = (options: unknown) => () => shardedIds(options as Parameters<typeof shardedIds>[0])

  it('refuses a misspelled option, naming the one meant', () => {
    expect(make({ source: inProcess, table: { posts: { shard: 1 } } })).toThrow(
      /no option "table"\. Did you mean "tables"\?/,
    )
    expect(make({ source: inProcess, tables: { posts: { sameShardsAs: 'author_id' } } })).toThrow(
      /table "posts" has no option "sameShardsAs"\. Did you mean "sameShardAs"\?/,
    )
  })

  it('refuses a missing source or tables', () => {
    expect(make({ tables: { posts: { shard: 1 } } })).toThrow(ConfigurationError)
    expect(make({ source: inProcess })).toThrow(InvalidArgumentError)
    expect(make({ source: inProcess, tables: {} })).toThrow(InvalidArgumentError)
  })

  it('refuses rules that name nothing, name two things, or name the key column', () => {
    expect(make({ source: inProcess, tables: { posts: {} } })).toThrow(InvalidShardRuleError)
    expect(
      make({ source: inProcess, tables: { posts: { shardBy: 'a', sameShardAs: 'b' } } }),
    ).toThrow(InvalidShardRuleError)
    expect(make({ source: inProcess, tables: { posts: { shardBy: 'id' } } })).toThrow(
      /'id' is the key column itself/,
    )
    expect(
      make({
        source: inProcess,
        tables: { events: { column: 'event_id', sameShardAs: 'event_id' } },
      }),
    ).toThrow(InvalidShardRuleError)
  })

  it('refuses a fixed shard outside the logical shards', () => {
    expect(make({ source: inProcess, tables: { counters: { shard: 64 } } })).toThrow(
      ShardOutOfRangeError,
    )
    expect(make({ source: inProcess, tables: { counters: { shard: 63 } } })).not.toThrow()
  })

  it('refuses an empty key column name', () => {
    expect(make({ source: inProcess, tables: { posts: { column: '', shard: 1 } } })).toThrow(
      InvalidArgumentError,
    )
  })
})

describe('assign()', () => {
  for (const kind of ['synchronous', 'asynchronous'] as const) {
    const source = (): CountingSource =>
      new CountingSource(kind === 'synchronous' ? inProcess : asAsync(inProcess))
    const idsOf = (counting: IdSource) =>
      shardedIds({
        source: counting,
        tables: {
          posts: { sameShardAs: 'author_id' },
          events: { column: 'event_id', shardBy: 'tenant_id' },
        },
      })

    it(`gives rows IDs on their rule's shard, one call per shard, keeping given IDs (${kind})`, async () => {
      const counting = source()
      const ids = idsOf(counting)
      const a = sharding.layout.compose({ timestamp: Date.now(), shard: 3, sequence: 0 })
      const b = sharding.layout.compose({ timestamp: Date.now(), shard: 9, sequence: 0 })
      const given = sharding.layout.compose({ timestamp: Date.now() - 1000, shard: 9, sequence: 5 })
      const rows = await ids.assign('posts', [
        { author_id: a, title: '1' },
        { author_id: b, title: '2' },
        { author_id: a.toString(), title: '3' },
        { author_id: b, title: '4', id: given },
      ])
      expect(rows.map((row) => sharding.shardOfId(row.id))).toEqual([3, 9, 3, 9])
      expect(rows[3]!.id).toBe(given)
      expect(rows[0]!.title).toBe('1')
      expect(counting.nextIdsCalls + counting.nextIdCalls).toBe(2)
      expect(counting.idsIssued).toBe(3)
      const [event] = await ids.assign<{ tenant_id: number }, 'event_id'>('events', [
        { tenant_id: 31341 },
      ])
      expect(sharding.shardOfId(event!.event_id)).toBe(31341 % 64)
      const one = await ids.assign('posts', { author_id: a, title: 'one' })
      expect(sharding.shardOfId(one.id)).toBe(3)
    })

    it(`refuses bad rows before drawing any ID (${kind})`, async () => {
      const counting = source()
      const ids = idsOf(counting)
      const a = sharding.layout.compose({ timestamp: Date.now(), shard: 3, sequence: 0 })
      const misplaced = sharding.layout.compose({ timestamp: Date.now(), shard: 4, sequence: 0 })
      await expect(ids.assign('posts', [{ author_id: a }, { title: 'orphan' }])).rejects.toThrow(
        MissingShardKeyError,
      )
      await expect(
        ids.assign('posts', [{ author_id: a }, { author_id: a, id: misplaced }]),
      ).rejects.toThrow(MisplacedIdError)
      // (a table name TypeScript would refuse, as from JavaScript)
      const undeclared: string = 'comments'
      await expect(ids.assign(undeclared, [{ post_id: a }])).rejects.toThrow(InvalidArgumentError)
      expect(counting.idsIssued).toBe(0)
    })
  }
})
