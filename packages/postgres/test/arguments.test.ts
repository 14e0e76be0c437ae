import {
  ConfigurationError,
  InvalidArgumentError,
  InvalidIdentifierError,
  type ShardflakeError,
  SourceUnavailableError,
} from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  commonSql,
  defaultClause,
  fenceSql,
  installPostgres,
  movePostgresShards,
  PostgresSource,
  postgresSql,
  readInstalledSharding,
  readInstalledShards,
  setDefault,
  setDefaultSql,
  shardSql,
} from '../src/index'
import { createDatabase, dropDatabase, PG_URL, RUN, sharding } from './helpers'

/**
 * What a user can get wrong in the arguments and options, refused with a typed error whose
 * message says what to do, before anything is written: misspelled options (named with the closest
 * known one), a missing client, a database that does not exist, a `context.query` that returns
 * something else than the statement's rows.
 */
const DB = 'sf_pg_arguments'
let url: string
let pool: pg.Pool

beforeAll(async () => {
  url = await createDatabase(DB)
  pool = new pg.Pool({ connectionString: url, max: 4 })
  pool.on('error', () => undefined)
  await installPostgres(pool, { sharding, shards: '0-3' })
})
afterAll(async () => {
  await pool.end()
  await dropDatabase(DB)
})

/** Calls `run` as a JavaScript caller may, with any arguments. */
function call(run: (...args: never[]) => unknown, ...args: unknown[]): unknown {
  return Reflect.apply(run, undefined, args)
}

/** `new Source(...args)`, as a JavaScript caller may write it. */
function construct(source: new (...args: never[]) => unknown, ...args: unknown[]): unknown {
  return Reflect.construct(source, args)
}

async function errorOf(run: () => unknown): Promise<ShardflakeError> {
  try {
    await run()
  } catch (error) {
    return error as ShardflakeError
  }
  throw new Error('expected a refusal')
}

describe('misspelled options are refused, naming the closest known one', () => {
  it('PostgresSource, installPostgres, movePostgresShards, the SQL generators and readers', async () => {
    const cases: [() => unknown, string][] = [
      [
        () => construct(PostgresSource, { sharding, databases: pool, timeoutMS: 5 }),
        'PostgresSource options has no option "timeoutMS". Did you mean "timeoutMs"?',
      ],
      [
        () => call(installPostgres, pool, { sharding, shards: [0], maxDriftMS: 5 }),
        'installPostgres options has no option "maxDriftMS". Did you mean "maxDriftMs"?',
      ],
      [
        () =>
          call(movePostgresShards, { sharding, from: pool, to: pool, shards: [0], lockTimeout: 5 }),
        'movePostgresShards options has no option "lockTimeout". Did you mean "lockTimeoutMs"?',
      ],
      [
        () => call(postgresSql, { sharding, shards: [0], cahce: 2 }),
        'postgresSql options has no option "cahce". Did you mean "cache"?',
      ],
      [() => call(commonSql, { sharding, shema: 'x' }), '"shema"'],
      [() => call(shardSql, { sharding, marginMS: 1 }, 0), '"marginMS"'],
      [() => call(fenceSql, { sharding, wroker: 1 }, 0), '"wroker"'],
      [() => call(readInstalledSharding, pool, { shema: 'x' }), '"shema"'],
      [() => call(readInstalledShards, pool, { includeRetierd: true }), '"includeRetierd"'],
      [
        () => call(setDefault, pool, { table: 'posts', shard: 1, colum: 'id' }),
        'Did you mean "column"?',
      ],
      [
        () => call(setDefaultSql, { table: 'posts', shard: 1, schemaPrefx: 'app_' }),
        'setDefaultSql options has no option "schemaPrefx". Did you mean "schemaPrefix"?',
      ],
      [
        () => call(defaultClause, 1, { schema_prefix: 'app_' }),
        'defaultClause options has no option "schema_prefix". Did you mean "schemaPrefix"?',
      ],
      [
        () =>
          construct(PostgresSource, {
            sharding,
            databases: pool,
            prefetch: { size: 10, maxAge: 5 },
          }),
        'prefetch has no option "maxAge". Did you mean "maxAgeMs"?',
      ],
    ]
    for (const [run, message] of cases) {
      const error = await errorOf(run)
      expect(error).toBeInstanceOf(InvalidArgumentError)
      expect(error.message).toContain(message)
    }
  })
})

describe('arguments', () => {
  it('a missing client: InvalidArgumentError, not "the server is down"', async () => {
    for (const client of [undefined, null, 'postgres://x', {}]) {
      const error = await errorOf(() => call(installPostgres, client, { sharding, shards: [0] }))
      expect(error).toBeInstanceOf(InvalidArgumentError)
      expect(error.message).toContain('installPostgres needs a database client: a pg.Pool')
    }
    const move = await errorOf(() =>
      call(movePostgresShards, { sharding, from: pool, to: undefined, shards: [0] }),
    )
    expect(move).toBeInstanceOf(InvalidArgumentError)
    expect(move.message).toContain('movePostgresShards (to) needs a database client')
    for (const read of [readInstalledSharding, readInstalledShards, setDefault]) {
      expect(await errorOf(() => call(read, undefined, {}))).toBeInstanceOf(InvalidArgumentError)
    }
  })

  it('options of the wrong type: typed, before anything runs', async () => {
    const none = await errorOf(() => call(installPostgres, pool, undefined))
    expect(none).toBeInstanceOf(ConfigurationError)
    expect(none.message).toContain('logicalShards')
    expect(
      await errorOf(() => call(installPostgres, pool, { sharding, shards: [0], onProgress: 5 })),
    ).toBeInstanceOf(InvalidArgumentError)
    expect(await errorOf(() => call(setDefault, pool, { table: 5, shard: 1 }))).toBeInstanceOf(
      InvalidIdentifierError,
    )
    for (const useContextQuery of ['yes', 1, {}]) {
      expect(
        await errorOf(() =>
          construct(PostgresSource, { sharding, databases: pool, useContextQuery }),
        ),
      ).toBeInstanceOf(InvalidArgumentError)
    }
    expect(
      await errorOf(() =>
        construct(PostgresSource, { sharding, databases: pool, schemaPrefix: 5 }),
      ),
    ).toBeInstanceOf(InvalidIdentifierError)
  })

  it('readInstalledShards of a database without an installation: none', async () => {
    expect(await readInstalledShards(pool, { schema: 'nothing_here' })).toEqual([])
  })
})

describe('a database that does not exist', () => {
  const missing = `sf_no_such_db_${RUN}`
  const missingUrl = () => {
    const parsed = new URL(PG_URL)
    parsed.pathname = `/${missing}`
    return parsed.toString()
  }

  it('PostgresSource: ConfigurationError (not retryable) naming the database', async () => {
    const source = new PostgresSource({ sharding, databases: missingUrl() })
    try {
      const error = await errorOf(() => source.nextIds(1, 5))
      expect(error).toBeInstanceOf(ConfigurationError)
      expect(error.retryable).toBe(false)
      expect(error.message).toContain(`database "${missing}" does not exist`)
      expect(error.message).toContain('Check the database name')
    } finally {
      await source.close()
    }
  })

  it('installPostgres on a pool to it: ConfigurationError naming the database', async () => {
    const missingPool = new pg.Pool({ connectionString: missingUrl() })
    try {
      const error = await errorOf(() => installPostgres(missingPool, { sharding, shards: [0] }))
      expect(error).toBeInstanceOf(ConfigurationError)
      expect(error.message).toContain(`database "${missing}" does not exist`)
    } finally {
      await missingPool.end()
    }
  })
})

describe('a context.query that does not return the rows of the statement it was given', () => {
  for (const [name, answer] of [
    ['null', null],
    ['no rows', []],
    ['a row without ids', [{}]],
    ['non-numeric ids', [{ ids: 'abc,def' }]],
    ['a number', [{ ids: 5 }]],
  ] as const) {
    it(`${name}: SourceUnavailableError, nothing issued`, async () => {
      const source = new PostgresSource({ sharding, databases: pool, useContextQuery: true })
      const query = async () => answer
      const error = await errorOf(() => call(source.nextIds.bind(source), 1, 2, { query }))
      expect(error).toBeInstanceOf(SourceUnavailableError)
      expect(error.message).toContain('is context.query running the statement it is given')
      await source.close()
    })
  }
})
