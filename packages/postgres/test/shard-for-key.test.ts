import { defineSharding, instagram, shardForKey } from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { installPostgres } from '../src/index'
import { createDatabase, dropDatabase } from './helpers'

const DB = 'sf_pg_keys'
const sharding64 = defineSharding({ layout: instagram, logicalShards: 64 })
let pool: pg.Pool

beforeAll(async () => {
  const url = await createDatabase(DB)
  pool = new pg.Pool({ connectionString: url, max: 2 })
  pool.on('error', () => undefined) // terminated by DROP DATABASE ... FORCE at teardown
  await installPostgres(pool, { sharding: sharding64, shards: [0] })
})
afterAll(async () => {
  await pool.end()
  await dropDatabase(DB)
})

async function sqlShard(key: unknown, cast = 'text', mode?: string): Promise<number | string> {
  try {
    const { rows } = await pool.query(
      `SELECT shardflake.shard_for_key($1::${cast}${mode === undefined ? '' : ', $2'}) AS s`,
      mode === undefined ? [key] : [key, mode],
    )
    return rows[0].s as number
  } catch (error) {
    return (error as { code: string }).code
  }
}

describe('shard_for_key in PostgreSQL', () => {
  it('places -5 and 2^64 - 1 where core does, as text and as numbers', async () => {
    expect(await sqlShard('-5')).toBe(59)
    expect(await sqlShard('-5', 'numeric')).toBe(59)
    expect(await sqlShard('-5', 'bigint')).toBe(59)
    expect(await sqlShard('18446744073709551615')).toBe(63)
    expect(await sqlShard('18446744073709551615', 'numeric')).toBe(63)
    expect(await sqlShard('-9223372036854775808', 'bigint')).toBe(shardForKey(-(2n ** 63n), 64))
    // Integers wider than 64 bits are placed by their value, as core places them.
    for (const key of [
      '18446744073709551616',
      '-9223372036854775809',
      '123456789012345678901234567890',
      `-${'9'.repeat(1023)}`,
      `${'0'.repeat(1000)}${'7'.repeat(24)}`,
    ]) {
      expect(await sqlShard(key)).toBe(shardForKey(key, 64))
      expect(await sqlShard(key, 'numeric')).toBe(shardForKey(key, 64))
    }
    for (const key of ['007', '-0', '+5', ' 5', 'acme', 'ACME', 'acme ', '😀', 'e\u0301']) {
      expect(await sqlShard(key)).toBe(shardForKey(key, 64))
      expect(await sqlShard(key, 'text', 'hash')).toBe(shardForKey(key, 64, 'hash'))
    }
  })

  it('refuses what core refuses: SF008 missing, SF009 outside the domain, 22023 a bad mode', async () => {
    for (const key of [null, '', ' ', '\t\u3000\ufeff']) expect(await sqlShard(key)).toBe('SF008')
    expect(await sqlShard(null, 'numeric')).toBe('SF008')
    for (const key of ['a'.repeat(1025), '5'.repeat(1025)]) {
      expect(await sqlShard(key)).toBe('SF009')
    }
    for (const key of ['1.5', '-0.5', 'NaN', 'Infinity', '-Infinity']) {
      expect(await sqlShard(key, 'numeric')).toBe('SF009')
    }
    expect(await sqlShard('a', 'text', 'upper')).toBe('22023')
  })

  it('an install over functions of an earlier version replaces them', async () => {
    // An earlier version refused negative keys; installing again must replace the function.
    await pool.query(
      `CREATE OR REPLACE FUNCTION shardflake.shard_for_key(shard_key text, key_mode text DEFAULT 'auto') RETURNS integer
       LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN shard_key LIKE '-%' THEN NULL ELSE 0 END $$`,
    )
    expect(await sqlShard('-5')).toBe(null)
    await installPostgres(pool, { sharding: sharding64, shards: [0] })
    expect(await sqlShard('-5')).toBe(59)
  })
})

describe('translatePostgresError', () => {
  it('turns SF008 and SF009 into the errors core throws for the same keys', async () => {
    const { translatePostgresError } = await import('../src/index')
    const { InvalidArgumentError, MissingShardKeyError } = await import('@shardflake/core')
    const failure = async (key: string) =>
      translatePostgresError(
        await pool.query('SELECT shardflake.shard_for_key($1::text)', [key]).catch((e) => e),
        { what: 'shard_for_key' },
      )
    expect(await failure(' ')).toBeInstanceOf(MissingShardKeyError)
    expect(await failure('5'.repeat(1025))).toBeInstanceOf(InvalidArgumentError)
  })
})
