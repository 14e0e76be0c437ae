import { readFileSync } from 'node:fs'
import {
  ConfigurationError,
  defineLayout,
  defineSharding,
  instagram,
  ShardingMismatchError,
} from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  fenceSql,
  type InstallProgress,
  installPostgres,
  readInstalledSharding,
  readInstalledShards,
  SQL_VERSION,
  setDefault,
} from '../src/index'
import { createDatabase, dropDatabase, raw, sharding } from './helpers'

const DB = 'sf_pg_install'
let url: string
let pool: pg.Pool

beforeAll(async () => {
  url = await createDatabase(DB)
  pool = new pg.Pool({ connectionString: url, max: 4 })
  pool.on('error', () => undefined) // terminated by DROP DATABASE ... FORCE at teardown
})
afterAll(async () => {
  await pool.end()
  await dropDatabase(DB)
})

describe('installPostgres', () => {
  it('installs many shards with progress, records them, and is idempotent', async () => {
    const progress: InstallProgress[] = []
    const result = await installPostgres(pool, {
      sharding,
      shards: '0-119',
      shardsPerTransaction: 50,
      onProgress: (p) => progress.push(p),
    })
    expect(result.shards).toHaveLength(120)
    expect(progress).toHaveLength(120)
    expect(progress[0]).toEqual({ done: 1, total: 120, shard: 0 })
    expect(progress.at(-1)).toEqual({ done: 120, total: 120, shard: 119 })
    const [before] = await raw<{ id: string }>(url, 'SELECT shard_42.next_id()::text AS id')
    await installPostgres(pool, { sharding, shards: '0-119' })
    const [after] = await raw<{ id: string }>(url, 'SELECT shard_42.next_id()::text AS id')
    expect(BigInt(after!.id) > BigInt(before!.id)).toBe(true)
    const [schemas] = await raw<{ n: string }>(
      url,
      `SELECT count(*)::text AS n FROM pg_namespace WHERE nspname ~ '^shard_[0-9]+$'`,
    )
    expect(schemas!.n).toBe('120')
    const [meta] = await raw<{ n: string; epoch: string }>(
      url,
      'SELECT (SELECT count(*) FROM shardflake.shards)::text AS n, epoch_ms::text AS epoch FROM shardflake.layout',
    )
    expect(meta).toEqual({ n: '120', epoch: String(instagram.epoch) })
    expect((await readInstalledSharding(pool))?.equals(sharding)).toBe(true)
    expect(await readInstalledShards(pool)).toHaveLength(120)
  })

  it('refuses another logicalShards over the installed one, changing nothing', async () => {
    const error = await installPostgres(pool, {
      sharding: defineSharding({ layout: instagram, logicalShards: 4000 }),
      shards: [500],
    }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ShardingMismatchError)
    expect((error as Error).message).toMatch(
      /with logicalShards 2000, but .* with logicalShards 4000/,
    )
    const [row] = await raw<{ present: boolean; logical: number }>(
      url,
      `SELECT to_regnamespace('shard_500') IS NOT NULL AS present, (SELECT logical_shards FROM shardflake.layout) AS logical`,
    )
    expect(row).toEqual({ present: false, logical: 2000 })
  })

  it('refuses a different layout over the installed one, changing nothing', async () => {
    const other = defineLayout({
      name: 'other',
      epoch: '2024-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
    })
    const error = await installPostgres(pool, {
      sharding: defineSharding({ layout: other, logicalShards: 2000 }),
      shards: [500],
    }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ShardingMismatchError)
    expect((error as Error).message).toMatch(
      /database "sf_pg_install_\w+" uses layout "instagram".*this application uses layout "other"/,
    )
    const [present] = await raw<{ present: boolean }>(
      url,
      `SELECT to_regnamespace('shard_500') IS NOT NULL AS present`,
    )
    expect(present!.present).toBe(false)
  })

  it('refuses a shard already installed under another schema name', async () => {
    const error = await installPostgres(pool, {
      sharding,
      shards: [3],
      schemaPrefix: 'other_',
    }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ConfigurationError)
    expect((error as Error).message).toMatch(/already installed in schema shard_3/)
  })

  it('adds DEFAULT next_id() to an existing table; raw INSERTs then get IDs of the shard', async () => {
    await raw(url, 'CREATE TABLE public.posts (id bigint PRIMARY KEY, body text)')
    await setDefault(pool, { table: 'public.posts', shard: 17 })
    await raw(url, `INSERT INTO public.posts (body) SELECT 'x' FROM generate_series(1, 500)`)
    const rows = await raw<{ id: string }>(url, 'SELECT id::text AS id FROM public.posts')
    expect(new Set(rows.map((r) => r.id)).size).toBe(500)
    for (const row of rows) expect(instagram.shardOf(row.id)).toBe(17)
  })
})

describe('no error handlers in the installed functions (Citus runs them inside distributed statements)', () => {
  /** Installed functions of the common and shard schemas whose body has an EXCEPTION block. */
  async function withHandlers(): Promise<string[]> {
    const rows = await raw<{ name: string }>(
      url,
      `SELECT n.nspname || '.' || p.proname AS name
       FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
       WHERE (n.nspname = 'shardflake' OR n.nspname LIKE 'shard\\_%')
         AND p.prosrc ~* '\\mEXCEPTION\\s+WHEN\\M'
       ORDER BY 1`,
    )
    return rows.map((row) => row.name)
  }

  it('no installed function (common or shard schema, fenced or not) has an EXCEPTION block', async () => {
    await installPostgres(pool, { sharding, shards: [40, 41] })
    // Shard 41 moved away: its routines are replaced by ones that refuse.
    await raw(url, `BEGIN; ${fenceSql({ sharding }, 41).script} COMMIT;`)
    await expect(raw(url, 'SELECT shard_41.next_id()')).rejects.toMatchObject({ code: 'SF005' })
    const [functions] = await raw<{ n: number }>(
      url,
      `SELECT count(*)::int AS n FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
       WHERE n.nspname IN ('shardflake', 'shard_40', 'shard_41')`,
    )
    expect(functions!.n).toBeGreaterThan(15)
    expect(await withHandlers()).toEqual([])
  })

  it('INSERT ... SELECT FROM generate_series relying on DEFAULT next_id() gets distinct IDs, catching up on the way', async () => {
    await installPostgres(pool, { sharding, shards: [42] })
    await raw(
      url,
      'CREATE TABLE public.bulk (id bigint PRIMARY KEY DEFAULT shard_42.next_id(), n integer NOT NULL)',
    )
    const genBefore = BigInt(
      (await raw<{ g: string }>(url, 'SELECT last_value::text AS g FROM shard_42.id_gen'))[0]!.g,
    )
    for (let round = 0; round < 5; round++) {
      // The sequence falls behind the clock between rounds: each statement moves it forward.
      await new Promise((resolve) => setTimeout(resolve, 80))
      await raw(url, 'INSERT INTO public.bulk (n) SELECT i FROM generate_series(1, 20000) AS i')
    }
    const [count] = await raw<{ n: string; d: string; shards: string }>(
      url,
      `SELECT count(*)::text AS n, count(DISTINCT id)::text AS d,
              string_agg(DISTINCT shardflake.shardflake_shard(id)::text, ',') AS shards FROM public.bulk`,
    )
    expect(count).toEqual({ n: '100000', d: '100000', shards: '42' })
    const genAfter = BigInt(
      (await raw<{ g: string }>(url, 'SELECT last_value::text AS g FROM shard_42.id_gen'))[0]!.g,
    )
    expect(genAfter - genBefore).toBeGreaterThanOrEqual(5n)
  })

  it('upgrades an installation of SQL version 5: handlers gone, the sequence goes on, the shard recorded as the current version', async () => {
    const DB5 = 'sf_pg_install_v5'
    const url5 = await createDatabase(DB5)
    const pool5 = new pg.Pool({ connectionString: url5, max: 2 })
    pool5.on('error', () => undefined)
    try {
      const v5 = readFileSync(new URL('./fixtures/sql-v5-shard-9.sql', import.meta.url), 'utf8')
      await raw(url5, v5)
      const before = await raw<{ id: string }>(
        url5,
        'SELECT x::text AS id FROM shard_9.next_ids(500) x',
      )
      const [old] = await raw<{ n: number }>(
        url5,
        `SELECT count(*)::int AS n FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = 'shard_9' AND p.prosrc ~* '\\mEXCEPTION\\s+WHEN\\M'`,
      )
      expect(old!.n).toBeGreaterThan(0)
      await installPostgres(pool5, { sharding, shards: [9, 10] })
      const [handlers] = await raw<{ n: number; unlock: number }>(
        url5,
        `SELECT count(*) FILTER (WHERE p.prosrc ~* '\\mEXCEPTION\\s+WHEN\\M')::int AS n,
                count(*) FILTER (WHERE p.proname = '_unlock')::int AS unlock
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname IN ('shardflake', 'shard_9', 'shard_10')`,
      )
      expect(handlers).toEqual({ n: 0, unlock: 0 })
      const versions = await raw<{ shard: number; version: string }>(
        url5,
        'SELECT shard, version FROM shardflake.shards ORDER BY shard',
      )
      expect(versions).toEqual([
        { shard: 9, version: SQL_VERSION },
        { shard: 10, version: SQL_VERSION },
      ])
      await new Promise((resolve) => setTimeout(resolve, 80))
      const after = await raw<{ id: string }>(
        url5,
        'SELECT shard_9.next_id()::text AS id FROM generate_series(1, 300) UNION ALL SELECT x::text FROM shard_9.next_ids(500) x',
      )
      const last = BigInt(before[before.length - 1]!.id) // next_ids(n) is ascending
      for (const row of after) expect(BigInt(row.id) > last).toBe(true)
      expect(new Set(after.map((r) => r.id)).size).toBe(800)
      expect(await readInstalledShards(pool5)).toEqual([9, 10])
    } finally {
      await pool5.end()
      await dropDatabase(DB5)
    }
  })
})
