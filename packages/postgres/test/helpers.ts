import { randomBytes } from 'node:crypto'
import { defineSharding, instagram } from '@shardflake/core'
import pg from 'pg'
import { moveLockKey, resolveSqlOptions } from '../src/sql/options'

/** The sharding most tests use: the Instagram layout over 2000 logical shards. */
export const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })

/** Unique to this test process: database names end with it, so two runs never meet. */
export const RUN = `${process.pid}_${randomBytes(3).toString('hex')}`

/** The per-run name of a test database. */
export function runName(name: string): string {
  return `${name}_${RUN}`
}

/** The main server (a database on it is created per test file). */
export const PG_URL = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url)
  parsed.pathname = `/${database}`
  return parsed.toString()
}

/**
 * Creates database `name` plus this run's tag ({@link runName}) on the server of `serverUrl`
 * (recreating it if this very run left it behind); returns its URL.
 */
export async function createDatabase(base: string, serverUrl = PG_URL): Promise<string> {
  const name = runName(base)
  const admin = new pg.Client({ connectionString: serverUrl })
  await admin.connect()
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
    await admin.query(`CREATE DATABASE "${name}"`)
  } finally {
    await admin.end()
  }
  return withDatabase(serverUrl, name)
}

/** Drops this run's database `name` ({@link runName}). */
export async function dropDatabase(base: string, serverUrl = PG_URL): Promise<void> {
  const name = runName(base)
  const admin = new pg.Client({ connectionString: serverUrl })
  await admin.connect()
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
  } finally {
    await admin.end()
  }
}

/** Runs `sql` on a fresh raw connection (the verifier, not the code under test). */
export async function raw<T = Record<string, unknown>>(
  url: string,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query(sql, params)).rows as T[]
  } finally {
    await client.end()
  }
}

/**
 * Takes, on `client`'s session, the lock a move of shard `shard`'s sequence takes at its current
 * generation (what `_catch_up`, `_reserve` and `_wait_gen` try), as a session lock; returns what
 * lets go of it. Moves of the shard then wait, and so do draws while `id_gen` is "not called".
 */
export async function holdMoveLock(
  client: pg.Client,
  shard: number,
  options: { schemaPrefix?: string } = {},
): Promise<() => Promise<void>> {
  const prefix = options.schemaPrefix ?? 'shard_'
  const { rows } = await client.query(`SELECT last_value::text AS g FROM ${prefix}${shard}.id_gen`)
  const key = moveLockKey(resolveSqlOptions({ sharding }), shard, BigInt(rows[0].g as string))
  await client.query('SELECT pg_advisory_lock($1, $2)', key)
  return async () => {
    await client.query('SELECT pg_advisory_unlock($1, $2)', key)
  }
}
