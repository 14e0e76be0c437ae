/**
 * shardedDataSources() beyond the routed conformance suite: the guard every routed DataSource
 * runs on any write path, and the refusals of a bad setup. Two fresh databases on the shared
 * PostgreSQL server play servers a and b.
 */
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
  trustSuppliedIds,
  WrongServerError,
} from '@shardflake/core'
import { BeforeInsert, Column, DataSource, Entity } from 'typeorm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type ShardedDataSources, ShardedId, shardedDataSources, shardedIds } from '../src'
import { Author, Comment, Keyed, Post } from './blog'

/** A row whose entity listener moves it from shard 1 (server a) to shard 41 (server b). */
@Entity('keyed')
class RekeyedBeforeInsert {
  @ShardedId<RekeyedBeforeInsert>({ shardBy: 'shardKey' })
  id?: string

  @Column({ type: 'varchar', name: 'shard_key' })
  shardKey!: string

  @BeforeInsert()
  rekey(): void {
    if (this.shardKey === '1') this.shardKey = '41'
  }
}

const sharding = testSharding()
const map = new ShardMap(sharding, [
  { from: 0, to: 31, target: 'a' },
  { from: 32, to: 63, target: 'b' },
])
const entities = [Author, Post, Comment, Keyed, RekeyedBeforeInsert]

describe('shardedDataSources (TypeORM, PostgreSQL)', () => {
  const raws: Record<string, RawDatabase> = {}
  const dataSources: Record<string, DataSource> = {}
  const source = new InProcessSource({ sharding, shards: 'all' })
  let homes: ShardHomes<DataSource>
  let sharded: ShardedDataSources

  beforeAll(async () => {
    for (const name of ['a', 'b']) {
      const raw = await freshDatabase('postgres', `sf_typeorm_routed_${name}`)
      for (const sql of blogSchemaSql('postgres')) await raw.query(sql)
      const dataSource = new DataSource({ type: 'postgres', url: raw.url, entities })
      shardedIds(dataSource, { source })
      raws[name] = raw
      dataSources[name] = await dataSource.initialize()
    }
    homes = await ShardHomes.open({ sharding, servers: dataSources, directory: map })
    sharded = shardedDataSources(homes)
  })

  afterAll(async () => {
    await homes?.close()
    for (const dataSource of Object.values(dataSources)) await dataSource.destroy()
    for (const raw of Object.values(raws)) await raw.close()
  })

  async function keyedRows(name: string): Promise<string[]> {
    const rows = await raws[name]!.query('SELECT shard_key FROM keyed ORDER BY shard_key')
    return rows.map((row) => String(row.shard_key))
  }

  it('refuses a row written through the DataSource of another server, on every path', async () => {
    // Shard 40 lives on b; each write goes through a's DataSource.
    const a = dataSources.a!
    const attempts: [string, () => Promise<unknown>][] = [
      ['save', () => a.getRepository(Keyed).save({ shardKey: '40' })],
      ['insert', () => a.getRepository(Keyed).insert({ shardKey: '41' })],
      [
        'query builder',
        () => a.createQueryBuilder().insert().into(Keyed).values({ shardKey: '42' }).execute(),
      ],
      [
        'save of a row of b in a batch of a',
        () => a.getRepository(Keyed).save([{ shardKey: '1' }, { shardKey: '43' }]),
      ],
      [
        'a supplied ID, trusted',
        () =>
          trustSuppliedIds(() =>
            a.getRepository(Keyed).save({ id: String(source.nextId(44)), shardKey: '44' }),
          ),
      ],
    ]
    for (const [path, attempt] of attempts) {
      const error = await attempt().then(
        () => undefined,
        (caught: unknown) => caught,
      )
      expect(error, path).toBeInstanceOf(WrongServerError)
      expect((error as WrongServerError).code).toBe('WRONG_SERVER')
      expect((error as Error).message).toMatch(/home is server "b"/)
    }
    expect(await keyedRows('a')).toEqual([])
    expect(await keyedRows('b')).toEqual([])
    // The same writes through the right DataSource, or the router, land at home.
    await dataSources.b!.getRepository(Keyed).save({ shardKey: '40' })
    await sharded.save(Keyed, [
      Object.assign(new Keyed(), { shardKey: '1' }),
      Object.assign(new Keyed(), { shardKey: '43' }),
    ])
    expect(await keyedRows('a')).toEqual(['1'])
    expect(await keyedRows('b')).toEqual(['40', '43'])
  })

  it('gives each new row of a save over two servers an ID of the shard of its key, on its server', async () => {
    const rows = ['2', '3', '34'].map((shardKey) => Object.assign(new Keyed(), { shardKey }))
    await sharded.save(Keyed, rows)
    expect(rows.map((row) => sharding.shardOfId(row.id!))).toEqual([2, 3, 34])
    expect(await keyedRows('a')).toEqual(expect.arrayContaining(['2', '3']))
    expect(await keyedRows('b')).toEqual(expect.arrayContaining(['34']))
  })

  it('places again a row whose key changed after the router placed it', async () => {
    // The router sends the row to a (shard 1); its @BeforeInsert listener, run before the
    // subscriber, sets a key of b's shard 41: refused, not written with an ID of shard 1.
    const row = Object.assign(new RekeyedBeforeInsert(), { shardKey: '1' })
    const error = await sharded.save(RekeyedBeforeInsert, row).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(WrongServerError)
    expect(row.id).toBeUndefined()
    expect(await keyedRows('a')).not.toContain('41')
    expect(await keyedRows('b')).not.toContain('41')
  })

  it('refuses an update of a row of another server', async () => {
    const [row] = await sharded.save(Keyed, [Object.assign(new Keyed(), { shardKey: '50' })])
    const error = await dataSources
      .a!.getRepository(Keyed)
      .save({ id: row!.id, shardKey: '50' })
      .catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(WrongServerError)
  })

  it('reads by ID, key and shard from the server holding it', async () => {
    const author = await sharded.save(
      Author,
      Object.assign(new Author(), { email: 'x@example.com' }),
    )
    const shard = sharding.shardOfId(author.id)
    const home = map.targetFor(shard)
    expect(sharded.forId(author.id)).toBe(dataSources[home])
    expect(sharded.forKey('x@example.com')).toBe(dataSources[home])
    expect(sharded.forShard(shard)).toBe(dataSources[home])
    expect(await sharded.repositoryFor(Author, author.id).findOneBy({ id: author.id })).toEqual(
      author,
    )
  })

  it('refuses a transaction target that names no server', async () => {
    const cases: [unknown, new (...args: never[]) => Error][] = [
      [undefined, InvalidArgumentError],
      [{}, InvalidArgumentError],
      [{ shard: 64 }, ShardOutOfRangeError],
      [{ key: null }, MissingShardKeyError],
    ]
    for (const [where, type] of cases) {
      await expect(sharded.transaction(where as never, async () => undefined)).rejects.toThrow(type)
    }
  })

  it('refuses ShardHomes whose DataSources have no shardedIds, or share one DataSource', async () => {
    const plain = new DataSource({ type: 'postgres', url: raws.a!.url, entities })
    const bare = await ShardHomes.open({
      sharding,
      servers: { a: plain, b: dataSources.b! },
      directory: map,
    })
    expect(() => shardedDataSources(bare)).toThrow(ConfigurationError)
    await bare.close()
    const shared = await ShardHomes.open({
      sharding,
      servers: { a: dataSources.a!, b: dataSources.a! },
      directory: map,
    })
    expect(() => shardedDataSources(shared)).toThrow(/same DataSource/)
    await shared.close()
    expect(() => shardedDataSources({} as never)).toThrow(InvalidArgumentError)
    expect(shardedDataSources(homes)).toBe(sharded)
  })
})
