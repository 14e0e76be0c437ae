/**
 * One key, one shard, everywhere: core's `shardForKey`, PostgreSQL's `shard_for_key` and the
 * MySQL/MariaDB `shard_for_key` (which `generate_id` uses) are asked for the shard of the same
 * random keys, and must give the same shard or refuse the key the same way. The Redis source does
 * not hash keys (it is handed a shard), so it has no implementation to ask.
 */
import { runTag } from '@shardflake/conformance'
import {
  defineSharding,
  InvalidArgumentError,
  instagram,
  MissingShardKeyError,
  type ShardKey,
  type StringKeyMode,
  shardForKey,
  UnsafeNumberError,
} from '@shardflake/core'
import { installMysql } from '@shardflake/mysql'
import { installPostgres } from '@shardflake/postgres'
import fc from 'fast-check'
import mysql from 'mysql2/promise'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

/** Not a power of two, so that a hash folded by masking instead of `mod` shows. */
const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
const PG_SERVER = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const MYSQL_SERVER = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test'
const TAG = runTag()
const PG_DB = `sf_keys_${TAG}`
const MY_PREFIX = `sf_keys_${TAG}_`

/** A shard, or how the key was refused. */
type Answer = number | 'missing' | 'invalid'

let pgPool: pg.Pool
let myPool: mysql.Pool

async function pgAdmin(sql: string): Promise<void> {
  const admin = new pg.Client({ connectionString: PG_SERVER })
  await admin.connect()
  try {
    await admin.query(sql)
  } finally {
    await admin.end()
  }
}

beforeAll(async () => {
  await pgAdmin(`CREATE DATABASE "${PG_DB}"`)
  const url = new URL(PG_SERVER)
  url.pathname = `/${PG_DB}`
  pgPool = new pg.Pool({ connectionString: url.toString(), max: 1 })
  await installPostgres(pgPool, { sharding, shards: [0] })
  // Test wrappers: a refusal becomes its SQLSTATE, so that one statement asks for many keys.
  await pgPool.query(`CREATE SCHEMA keys_test;
    CREATE FUNCTION keys_test.try_text(k text, m text) RETURNS text LANGUAGE plpgsql AS $$
    BEGIN
      IF m IS NULL THEN RETURN NULL; END IF;
      RETURN shardflake.shard_for_key(k, m)::text;
    EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE;
    END $$;
    CREATE FUNCTION keys_test.try_numeric(n numeric) RETURNS text LANGUAGE plpgsql AS $$
    BEGIN
      RETURN shardflake.shard_for_key(n)::text;
    EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE;
    END $$;`)
  myPool = mysql.createPool({ uri: MYSQL_SERVER, connectionLimit: 1 })
  await installMysql(myPool, { sharding, shards: [0], schemaPrefix: MY_PREFIX })
  await myPool.query(
    `CREATE FUNCTION \`${MY_PREFIX}0\`.try_shard(k TEXT CHARACTER SET utf8mb4, m VARCHAR(8)) RETURNS VARCHAR(16)
       DETERMINISTIC NO SQL
     BEGIN
       DECLARE state VARCHAR(5);
       DECLARE EXIT HANDLER FOR SQLEXCEPTION
       BEGIN
         GET DIAGNOSTICS CONDITION 1 state = RETURNED_SQLSTATE;
         RETURN state;
       END;
       RETURN CAST(\`${MY_PREFIX}0\`.shard_for_key(k, m) AS CHAR);
     END`,
  )
})

afterAll(async () => {
  await pgPool?.end()
  await pgAdmin(`DROP DATABASE IF EXISTS "${PG_DB}" WITH (FORCE)`)
  await myPool?.query(`DROP DATABASE IF EXISTS \`${MY_PREFIX}0\``)
  await myPool?.end()
})

function inTs(key: ShardKey | null, mode: StringKeyMode): Answer {
  try {
    return shardForKey(key, sharding.logicalShards, mode)
  } catch (error) {
    if (error instanceof MissingShardKeyError) return 'missing'
    if (error instanceof InvalidArgumentError || error instanceof UnsafeNumberError) {
      return 'invalid'
    }
    throw error
  }
}

/** SF008 and SF009 are the documented refusals; 22021 is PostgreSQL refusing U+0000 in text. */
function refusal(code: string): Answer {
  if (code === 'SF008') return 'missing'
  if (code === 'SF009' || code === '22021') return 'invalid'
  throw new Error(`Unexpected SQLSTATE ${code}`)
}

function answer(value: string): Answer {
  return /^[0-9]+$/.test(value) ? Number(value) : refusal(value)
}

type Ask = readonly [key: ShardKey | null, mode: StringKeyMode]

const hasNul = (key: unknown) => typeof key === 'string' && key.includes('\0')

/**
 * Asks PostgreSQL for many keys in one round trip (the machine is shared and busy). The wrappers
 * only turn a refusal into its SQLSTATE; the shard comes from shard_for_key itself.
 */
async function inPostgres(asks: readonly Ask[]): Promise<Answer[]> {
  const { rows } = await pgPool.query(
    `SELECT keys_test.try_text(k, m) AS t, keys_test.try_numeric(n) AS n
       FROM unnest($1::text[], $2::text[], $3::numeric[]) WITH ORDINALITY AS x(k, m, n, i) ORDER BY i`,
    [
      asks.map(([key]) => (typeof key === 'bigint' || hasNul(key) ? null : key)),
      asks.map(([key, mode]) => (typeof key === 'bigint' || hasNul(key) ? null : mode)),
      asks.map(([key]) => (typeof key === 'bigint' ? key.toString() : null)),
    ],
  )
  const out: Answer[] = []
  for (const [i, [key]] of asks.entries()) {
    if (hasNul(key)) {
      // PostgreSQL text cannot hold U+0000: the statement is refused with 22021.
      const error = await pgPool.query('SELECT $1::text', [key]).then(
        () => ({ code: 'accepted' }),
        (e: { code: string }) => e,
      )
      out.push(refusal(error.code))
    } else {
      out.push(answer(String(typeof key === 'bigint' ? rows[i].n : rows[i].t)))
    }
  }
  return out
}

/** Asks MariaDB for many keys in one statement (one column per key). */
async function inMysql(asks: readonly Ask[]): Promise<Answer[]> {
  const columns = asks.map((_, i) => `\`${MY_PREFIX}0\`.try_shard(?, ?) AS c${i}`)
  const [rows] = await myPool.query(
    `SELECT ${columns.join(', ')}`,
    asks.flatMap(([key, mode]) => [typeof key === 'bigint' ? key.toString() : key, mode]),
  )
  const row = (rows as Record<string, string>[])[0]!
  return asks.map((_, i) => answer(String(row[`c${i}`])))
}

async function agree(asks: readonly Ask[]): Promise<void> {
  const postgres = await inPostgres(asks)
  const mysql = await inMysql(asks)
  for (const [i, [key, mode]] of asks.entries()) {
    const ts = inTs(key, mode)
    expect(
      { postgres: postgres[i], mysql: mysql[i] },
      `${typeof key === 'string' ? JSON.stringify(key) : String(key)} (${mode})`,
    ).toEqual({ postgres: ts, mysql: ts })
  }
}

const WHITE = [
  ' ',
  '\t',
  '\n',
  '\r',
  '\v',
  '\f',
  '\u00a0',
  '\u1680',
  '\u2000',
  '\u200a',
  '\u2028',
  '\u2029',
  '\u202f',
  '\u205f',
  '\u3000',
  '\ufeff',
  // Not white space to String.prototype.trim: these keys are text.
  '\u0085',
  '\u180e',
  '\u200b',
]
const white = fc.constantFrom(...WHITE)
const digits = fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: 1, maxLength: 24 })
const EDGES = [
  -(2n ** 63n),
  -(2n ** 63n) - 1n,
  -(2n ** 63n) + 1n,
  2n ** 63n - 1n,
  2n ** 63n,
  2n ** 64n - 1n,
  2n ** 64n,
  2n ** 64n + 1n,
  -(2n ** 64n),
  0n,
  -1n,
  -5n,
  2000n,
  -2000n, // a negative multiple of the shard count: 0, not 2000
  -(2000n * 10n ** 40n),
  BigInt('123456789012345678901234567890'),
  BigInt('18446744073709551617'),
  -(10n ** 1023n) + 1n, // '-' and 1023 nines: the longest negative digit key
  10n ** 1024n - 1n, // 1024 nines: the longest digit key
]

/** Integers of any width, beyond 64 bits: up to `digits` decimal digits, either sign. */
const wideInteger = (digits: number) =>
  fc
    .tuple(
      fc.boolean(),
      fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: 1, maxLength: digits }),
    )
    .map(([negative, d]) => (negative ? -1n : 1n) * BigInt(d))

/** Keys of every kind, as text (what a text column or a driver hands over). */
const textKey = fc.oneof(
  fc.string({ unit: 'binary-ascii', maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 12 }), // astral planes included
  fc.string({ unit: 'grapheme-composite', maxLength: 6 }), // combining marks
  fc
    .tuple(
      fc.constantFrom('', '-', '+', '--', ' ', '0', '00'),
      digits,
      fc.constantFrom('', ' ', '.0'),
    )
    .map(([a, b, c]) => a + b + c),
  fc.constantFrom(...EDGES).map(String),
  fc.bigInt({ min: -(2n ** 66n), max: 2n ** 66n }).map(String),
  wideInteger(400).map(String),
  fc
    .tuple(fc.constantFrom('', '-'), fc.constantFrom('0', '000'), wideInteger(60))
    .map(([sign, zeros, key]) => `${sign}${zeros}${key < 0n ? -key : key}`),
  fc.constantFrom('5'.repeat(1024), `-${'5'.repeat(1023)}`, `-${'5'.repeat(1024)}`, '-0', '-000'),
  fc.array(white, { maxLength: 4 }).map((chars) => chars.join('')),
  fc
    .tuple(fc.array(white, { maxLength: 2 }), fc.string({ maxLength: 4 }))
    .map(([w, s]) => w.join('') + s),
  fc.tuple(fc.string({ maxLength: 3 }), fc.string({ maxLength: 3 })).map(([a, b]) => `${a}\0${b}`),
  fc.constantFrom('a'.repeat(1024), '😀'.repeat(1024), 'a'.repeat(1025), '5'.repeat(1025)),
)

/** Keys as numbers (what a BIGINT column's value is in SQL). */
const integerKey = fc.oneof(
  fc.constantFrom(...EDGES),
  fc.bigInt({ min: -(2n ** 64n), max: 2n ** 65n }),
  fc.bigInt({ min: -2000n, max: 2000n }),
  wideInteger(300),
)

describe('one key, one shard: TypeScript, PostgreSQL and MySQL/MariaDB agree', () => {
  it('on every text key, in both modes, refusals included', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(textKey, fc.constantFrom<StringKeyMode>('auto', 'hash')), {
          minLength: 1,
          maxLength: 50,
        }),
        agree,
      ),
      { numRuns: 40 },
    )
  })

  it('on every integer key given as a number', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          integerKey.map((key): Ask => [key, 'auto']),
          { minLength: 1, maxLength: 50 },
        ),
        agree,
      ),
      { numRuns: 8 },
    )
  })

  it('on the keys that used to split them, and on NULL', async () => {
    const asks: Ask[] = [
      ['-5', 'auto'],
      [-5n, 'auto'],
      ['18446744073709551615', 'auto'],
      ['123456789012345678901234567890', 'auto'],
      [-123456789012345678901234567890n, 'auto'],
      [null, 'auto'],
    ]
    const expected = [1995, 1995, 1615, 1890, 110, 'missing']
    expect(await inPostgres(asks)).toEqual(expected)
    expect(await inMysql(asks)).toEqual(expected)
    expect(asks.map(([key, mode]) => inTs(key, mode))).toEqual(expected)
  })
})
