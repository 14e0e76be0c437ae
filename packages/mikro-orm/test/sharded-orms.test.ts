/**
 * shardedOrms() beyond the routed conformance suite: the guard every routed MikroORM runs at
 * flush, and the refusals of a bad setup. Two fresh databases on the shared PostgreSQL server
 * play servers a and b.
 */
import type { MikroORM } from '@mikro-orm/core'
import {
  blogSchemaSql,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import {
  ConfigurationError,
  InProcessSource,
  InvalidArgumentError,
  MissingShardKeyError,
  ShardHomes,
  ShardMap,
  ShardOutOfRangeError,
  WrongServerError,
} from '@shardflake/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type ShardedOrms, shardedIds, shardedOrms } from '../src'
import { openOrm } from './support/blog'
import { Author, Comment, Keyed, Post } from './support/entities-legacy'

const sharding = testSharding()
const map = new ShardMap(sharding, [
  { from: 0, to: 31, target: 'a' },
  { from: 32, to: 63, target: 'b' },
])
const entities = [Author, Post, Comment, Keyed]

describe('shardedOrms (MikroORM, PostgreSQL)', () => {
  const raws: Record<string, RawDatabase> = {}
  const orms: Record<string, MikroORM> = {}
  const source = new InProcessSource({ sharding, shards: 'all' })
  let homes: ShardHomes<MikroORM>
  let sharded: ShardedOrms

  beforeAll(async () => {
    for (const name of ['a', 'b']) {
      const raw = await freshDatabase('postgres', `sf_mikro_routed_${name}`)
      for (const sql of blogSchemaSql('postgres')) await raw.query(sql)
      raws[name] = raw
      orms[name] = await openOrm('postgres', raw.url, entities, [shardedIds({ source })])
    }
    homes = await ShardHomes.open({ sharding, servers: orms, directory: map })
    sharded = shardedOrms(homes)
  })

  afterAll(async () => {
    await homes?.close()
    for (const orm of Object.values(orms)) await orm.close(true)
    for (const raw of Object.values(raws)) await raw.close()
  })

  async function keyedRows(name: string): Promise<string[]> {
    const rows = await raws[name]!.query('SELECT shard_key FROM keyed ORDER BY shard_key')
    return rows.map((row) => String(row.shard_key))
  }

  it('refuses a row flushed through the MikroORM of another server, and writes nothing', async () => {
    // Key '40' is shard 40, whose home is b.
    const em = orms.a!.em.fork()
    em.create(Keyed, { shardKey: '40' })
    await expect(em.flush()).rejects.toThrow(WrongServerError)
    expect(await keyedRows('a')).toEqual([])
    // Rows of a first, then one of b (shard 50): every row's home is checked, not only the first.
    const mixed = orms.a!.em.fork()
    for (const shardKey of ['1', '2', '3', '50']) mixed.create(Keyed, { shardKey })
    await expect(mixed.flush()).rejects.toThrow(WrongServerError)
    expect(await keyedRows('a')).toEqual([])
    // An ID the caller gives (on shard 40, as its key says) is read for its home too.
    const given = orms.a!.em.fork()
    given.create(Keyed, { id: source.nextId(40), shardKey: '40' })
    await expect(given.flush()).rejects.toThrow(WrongServerError)
    expect(await keyedRows('a')).toEqual([])
    const [created] = await sharded.createAndFlush(Keyed, [{ shardKey: '40' }])
    expect(sharding.shardOfId(created!.id)).toBe(40)
    expect(await keyedRows('b')).toEqual(['40'])
  })

  it('refuses an update of a row of another server', async () => {
    const [created] = await sharded.createAndFlush(Keyed, [{ shardKey: '41' }])
    const onA = orms.a!.em.fork()
    // A row of shard 41 (home b) taken as loaded on a, then changed (key '105' is shard 41 too).
    const stranger = onA.merge(Keyed, { id: created!.id, shardKey: '41' })
    stranger.shardKey = '105'
    await expect(onA.flush()).rejects.toThrow(WrongServerError)
    expect(await keyedRows('b')).toContain('41')
  })

  it('reads by ID, key and shard from the server holding it', async () => {
    const [created] = await sharded.createAndFlush(Keyed, [{ shardKey: '7' }])
    expect((await sharded.forId(created!.id).findOne(Keyed, created!.id))?.shardKey).toBe('7')
    expect(await sharded.forKey('7').count(Keyed, { shardKey: '7' })).toBe(1)
    expect(await sharded.forShard(40).count(Keyed, { shardKey: '7' })).toBe(0)
  })

  it('refuses bad input with typed errors', async () => {
    const cases: [unknown, new (...args: never[]) => Error][] = [
      [undefined, InvalidArgumentError],
      [{}, InvalidArgumentError],
      [{ shard: 64 }, ShardOutOfRangeError],
      [{ key: null }, MissingShardKeyError],
    ]
    for (const [where, type] of cases) {
      await expect(sharded.transactional(where as never, async () => undefined)).rejects.toThrow(
        type,
      )
    }
    await expect(sharded.createAndFlush(Keyed, 'x' as never)).rejects.toThrow(InvalidArgumentError)
    await expect(sharded.createAndFlush(Keyed, [{}])).rejects.toThrow(MissingShardKeyError)
    expect(() => sharded.inShards([1], 'id; DROP TABLE keyed')).toThrow(InvalidArgumentError)
  })

  it('refuses ShardHomes whose ORMs have no shardedIds, or share one ORM', async () => {
    const plain = await openOrm('postgres', raws.a!.url, entities)
    try {
      const bare = await ShardHomes.open({
        sharding,
        servers: { a: plain, b: orms.b! },
        directory: map,
      })
      expect(() => shardedOrms(bare)).toThrow(ConfigurationError)
      await bare.close()
    } finally {
      await plain.close(true)
    }
    const shared = await ShardHomes.open({
      sharding,
      servers: { a: orms.a!, b: orms.a! },
      directory: map,
    })
    expect(() => shardedOrms(shared)).toThrow(/same MikroORM/)
    await shared.close()
    expect(() => shardedOrms({} as never)).toThrow(InvalidArgumentError)
    expect(shardedOrms(homes)).toBe(sharded)
  })
})
