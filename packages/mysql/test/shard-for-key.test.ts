import {
  defineSharding,
  InvalidArgumentError,
  instagram,
  MissingShardKeyError,
  shardForKey,
} from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { installMysql, SIGNALS } from '../src'
import { translateError } from '../src/errors'
import { createPool, dropDatabases, RUN, rows, sqlStateOf } from './helpers'

const PREFIX = `sf_my_keys_${RUN}_`
const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
const db = (shard: number) => `\`${PREFIX}${shard}\``
let pool: Pool

beforeAll(async () => {
  pool = createPool()
  await dropDatabases(pool, PREFIX)
  await installMysql(pool, { sharding, shards: [0, 59], schemaPrefix: PREFIX })
})
afterAll(async () => {
  await dropDatabases(pool, PREFIX)
  await pool.end()
})

async function sqlShard(key: unknown, mode = 'auto'): Promise<number | string | undefined> {
  try {
    const [row] = await rows<{ s: number }>(pool, `SELECT ${db(0)}.shard_for_key(?, ?) AS s`, [
      key,
      mode,
    ])
    return Number(row!.s)
  } catch (error) {
    return (error as { sqlState?: string }).sqlState
  }
}

describe('shard_for_key and generate_id in MySQL/MariaDB', () => {
  it('place -5, 2^64 - 1, wider integers and text keys where core does', async () => {
    expect(await sqlShard('-5')).toBe(59)
    expect(await sqlShard(-5)).toBe(59)
    expect(await sqlShard('18446744073709551615')).toBe(63)
    // Integers wider than 64 bits (wider than DECIMAL holds, too) are placed by their value.
    for (const key of [
      '18446744073709551616',
      '-9223372036854775809',
      '123456789012345678901234567890',
      `-${'9'.repeat(1023)}`,
      `${'0'.repeat(1000)}${'7'.repeat(24)}`,
      '9'.repeat(1024),
    ]) {
      expect(await sqlShard(key)).toBe(shardForKey(key, 64))
    }
    for (const key of ['007', '-0', '+5', ' 5', 'acme', 'ACME', 'acme ', '😀', 'e\u0301', '５']) {
      expect(await sqlShard(key)).toBe(shardForKey(key, 64))
      expect(await sqlShard(key, 'hash')).toBe(shardForKey(key, 64, 'hash'))
    }
    for (const key of ['-5', `-64${'0'.repeat(29)}5`]) {
      expect(shardForKey(key, 64)).toBe(59)
      await pool.query(`CALL ${db(59)}.generate_id(?, @o)`, [key])
      const [row] = await rows<{ id: string }>(pool, 'SELECT CAST(@o AS CHAR) AS id')
      expect(instagram.shardOf(row!.id)).toBe(59)
    }
  })

  it('refuse what core refuses: SF008 missing, SF009 outside the domain, 22023 a bad mode', async () => {
    for (const key of [null, '', ' ', '\t\u3000\ufeff']) {
      expect(await sqlShard(key)).toBe(SIGNALS.MISSING_KEY)
    }
    for (const key of ['5'.repeat(1025), 'a'.repeat(1025), 'a\0b']) {
      expect(await sqlShard(key)).toBe(SIGNALS.INVALID_KEY)
    }
    expect(await sqlShard('a', 'AUTO')).toBe('22023')
    const failure = await pool.query(`CALL ${db(0)}.generate_id(' ', @o)`).catch((e) => e)
    expect(translateError(failure, { what: 'generate_id' })).toBeInstanceOf(MissingShardKeyError)
    const invalid = await pool
      .query(`CALL ${db(0)}.generate_id(?, @o)`, ['5'.repeat(1025)])
      .catch((e) => e)
    expect(translateError(invalid, { what: 'generate_id' })).toBeInstanceOf(InvalidArgumentError)
  })

  it('an install over routines of an earlier version replaces them', async () => {
    // The earlier generate_id refused negative keys and keys over 19 digits.
    await pool.query(`DROP PROCEDURE ${db(59)}.generate_id`)
    await pool.query(
      `CREATE PROCEDURE ${db(59)}.generate_id(IN shard_key VARCHAR(40), OUT id BIGINT)
       BEGIN
         IF shard_key IS NULL OR shard_key NOT REGEXP '^-?[0-9]{1,19}$'
            OR MOD(CAST(shard_key AS DECIMAL(20, 0)), 64) <> 59 THEN
           SIGNAL SQLSTATE 'SF021' SET MESSAGE_TEXT = 'old';
         END IF;
         SET id = ${db(59)}.next_id();
       END`,
    )
    expect(await sqlStateOf(pool.query(`CALL ${db(59)}.generate_id('-5', @o)`))).toBe('SF021')
    await installMysql(pool, { sharding, shards: [0, 59], schemaPrefix: PREFIX })
    expect(await sqlStateOf(pool.query(`CALL ${db(59)}.generate_id('-5', @o)`))).toBeUndefined()
  })
})
