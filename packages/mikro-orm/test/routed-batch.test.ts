/**
 * How many INSERT statements a routed 1000-row `createAndFlush` sends each server: one flush per
 * server, which MikroORM splits into INSERTs of `batchSize` rows (300 by default). With a
 * `batchSize` covering a server's share, each server gets one INSERT per table. Three fresh
 * databases on the shared PostgreSQL server play servers a, b and c; each counts the INSERT
 * statements on `keyed` with a statement-level trigger, in the database itself.
 */
import type { MikroORM } from '@mikro-orm/core'
import {
  blogSchemaSql,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import { InProcessSource, ShardHomes, ShardMap } from '@shardflake/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { shardedIds, shardedOrms } from '../src'
import { openOrm } from './support/blog'
import { Author, Comment, Keyed, Post } from './support/entities-legacy'

const sharding = testSharding()
const map = new ShardMap(sharding, [
  { from: 0, to: 20, target: 'a' },
  { from: 21, to: 41, target: 'b' },
  { from: 42, to: 63, target: 'c' },
])
const SERVERS = ['a', 'b', 'c'] as const
const entities = [Author, Post, Comment, Keyed]
// Digit strings are integers: key mod 64 is the shard. 1000 rows over the 64 shards put 336,
// 334 and 330 rows on a, b and c.
const spread = Array.from({ length: 1000 }, (_, i) => ({ shardKey: String(i % 64) }))
const expectedRows = { a: 336, b: 334, c: 330 }

describe('createAndFlush of 1000 rows over three servers (MikroORM, PostgreSQL)', () => {
  const raws: Record<string, RawDatabase> = {}
  const source = new InProcessSource({ sharding, shards: 'all' })

  beforeAll(async () => {
    for (const name of SERVERS) {
      const raw = await freshDatabase('postgres', `sf_mikro_batch_${name}`)
      for (const sql of [
        ...blogSchemaSql('postgres'),
        'CREATE TABLE insert_statements (n INT NOT NULL)',
        `CREATE FUNCTION count_insert_statement() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN INSERT INTO insert_statements VALUES (1); RETURN NULL; END $$`,
        'CREATE TRIGGER keyed_insert_statements AFTER INSERT ON keyed FOR EACH STATEMENT EXECUTE FUNCTION count_insert_statement()',
      ]) {
        await raw.query(sql)
      }
      raws[name] = raw
    }
  })

  afterAll(async () => {
    for (const raw of Object.values(raws)) await raw.close()
  })

  async function counts(): Promise<{ statements: number[]; rows: number[] }> {
    const statements: number[] = []
    const rows: number[] = []
    for (const name of SERVERS) {
      const [s] = await raws[name]!.query('SELECT count(*)::int AS n FROM insert_statements')
      const [r] = await raws[name]!.query('SELECT count(*)::int AS n FROM keyed')
      statements.push(Number(s!.n))
      rows.push(Number(r!.n))
    }
    return { statements, rows }
  }

  /** Saves the 1000 rows through ORMs opened with `batchSize`; what each server received. */
  async function saveSpread(batchSize: number | undefined) {
    const orms: Record<string, MikroORM> = {}
    for (const name of SERVERS) {
      orms[name] = await openOrm(
        'postgres',
        raws[name]!.url,
        entities,
        [shardedIds({ source })],
        batchSize === undefined ? {} : { batchSize },
      )
    }
    const homes = await ShardHomes.open({ sharding, servers: orms, directory: map })
    try {
      const before = await counts()
      const created = await shardedOrms(homes).createAndFlush(Keyed, spread)
      const after = await counts()
      const ids = new Set(created.map((row) => row.id))
      return {
        distinctIds: ids.size,
        statements: after.statements.map((n, i) => n - before.statements[i]!),
        rows: after.rows.map((n, i) => n - before.rows[i]!),
        misplaced: created.filter(
          (row, i) => sharding.shardOfId(row.id) !== Number(spread[i]!.shardKey),
        ).length,
      }
    } finally {
      await homes.close()
      for (const orm of Object.values(orms)) await orm.close(true)
    }
  }

  it('sends one INSERT per server when batchSize covers each server’s rows', async () => {
    const saved = await saveSpread(1000)
    expect(saved.distinctIds).toBe(1000)
    expect(saved.misplaced).toBe(0)
    expect(saved.rows).toEqual(Object.values(expectedRows))
    expect(saved.statements).toEqual([1, 1, 1])
  })

  it('splits each server’s flush by batchSize, never across servers', async () => {
    // MikroORM's default (300): 336, 334 and 330 rows take two INSERTs each.
    const byDefault = await saveSpread(undefined)
    expect(byDefault.rows).toEqual(Object.values(expectedRows))
    expect(byDefault.statements).toEqual([2, 2, 2])
    const small = await saveSpread(100)
    expect(small.distinctIds).toBe(1000)
    expect(small.statements).toEqual(
      Object.values(expectedRows).map((rows) => Math.ceil(rows / 100)),
    )
  })
})
