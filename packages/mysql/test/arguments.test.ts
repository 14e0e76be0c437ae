import {
  ConfigurationError,
  defineSharding,
  InvalidArgumentError,
  InvalidIdentifierError,
  instagram,
  type ShardflakeError,
  SourceUnavailableError,
} from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  installMysql,
  installTicketServers,
  MysqlSource,
  moveMysqlShards,
  mysqlSql,
  mysqlTriggerSql,
  TicketServerSource,
  ticketServerSql,
} from '../src'
import { createPool, dropDatabases, MYSQL_URL, RUN } from './helpers'

/**
 * What a user can get wrong in the arguments and options, refused with a typed error whose
 * message says what to do, before anything is written: misspelled options (named with the closest
 * known one), a missing pool, servers that are not pools, a database that does not exist, a
 * sequence that is not installed, a `context.query` that returns something else than rows.
 */
const PREFIX = `sf_my_args_${RUN}_`
const SHARDS = `${PREFIX}s_`
const sharding = defineSharding({ layout: instagram, logicalShards: 16 })
let pool: Pool

beforeAll(async () => {
  pool = createPool()
  await dropDatabases(pool, PREFIX)
  await installMysql(pool, { sharding, shards: '0-3', schemaPrefix: SHARDS })
})
afterAll(async () => {
  await dropDatabases(pool, PREFIX)
  await pool.end()
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
  it('sources, installers, moves and the SQL generators', async () => {
    const cases: [() => unknown, string][] = [
      [
        () => construct(MysqlSource, { sharding, databases: pool, timeoutMS: 5 }),
        'MysqlSource options has no option "timeoutMS". Did you mean "timeoutMs"?',
      ],
      [
        () => call(installMysql, pool, { sharding, shards: [0], maxDriftMS: 5 }),
        'installMysql options has no option "maxDriftMS". Did you mean "maxDriftMs"?',
      ],
      [
        () =>
          call(moveMysqlShards, { sharding, from: pool, to: pool, shards: [0], lockTimeout: 5 }),
        'moveMysqlShards options has no option "lockTimeout". Did you mean "lockTimeoutMs"?',
      ],
      [() => call(mysqlSql, { sharding, shards: [0], dialet: 'mariadb' }), '"dialet"'],
      [
        () =>
          call(mysqlTriggerSql, { sharding, database: 'app', table: 't', shard: 0, colunm: 'id' }),
        'Did you mean "column"?',
      ],
      [
        () => call(ticketServerSql, { sequences: ['photos'], engin: 'InnoDB' }),
        'Did you mean "engine"?',
      ],
      [
        () =>
          construct(TicketServerSource, { servers: [pool], sequence: 'photos', retryAfterMS: 5 }),
        'TicketServerSource options has no option "retryAfterMS". Did you mean "retryAfterMs"?',
      ],
      [
        () => call(installTicketServers, { servers: [pool], sequence: 'photos', reconfigur: true }),
        'installTicketServers options has no option "reconfigur". Did you mean "reconfigure"?',
      ],
      [
        () => construct(TicketServerSource, { servers: [{ pool, ofset: 1 }], sequence: 'photos' }),
        'servers[0] has no option "ofset". Did you mean "offset"?',
      ],
      [
        () => construct(MysqlSource, { sharding, databases: pool, prefetch: { sise: 10 } }),
        'prefetch has no option "sise". Did you mean "size"?',
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
  it('a missing pool, or servers that are not pools: InvalidArgumentError naming what is needed', async () => {
    for (const missing of [undefined, null, 'mysql://root@127.0.0.1/test', {}]) {
      const error = await errorOf(() => call(installMysql, missing, { sharding, shards: [0] }))
      expect(error).toBeInstanceOf(InvalidArgumentError)
      expect(error.message).toContain('installMysql needs a mysql2 pool (createMysqlPool(url)')
    }
    expect(
      await errorOf(() => call(moveMysqlShards, { sharding, from: pool, to: null, shards: [0] })),
    ).toBeInstanceOf(InvalidArgumentError)
    for (const servers of [[null], ['x'], [5], [{ pool: 'x' }]]) {
      const error = await errorOf(() =>
        construct(TicketServerSource, { servers, sequence: 'photos' }),
      )
      expect(error).toBeInstanceOf(InvalidArgumentError)
      expect(error.message).toMatch(/^servers\[0\]/)
    }
    for (const servers of ['x', undefined, []]) {
      expect(
        await errorOf(() => construct(TicketServerSource, { servers, sequence: 'photos' })),
      ).toBeInstanceOf(ConfigurationError)
    }
    expect(
      await errorOf(() => construct(MysqlSource, { sharding, databases: 'not a url' })),
    ).toBeInstanceOf(InvalidArgumentError)
    expect(await errorOf(() => construct(MysqlSource, { sharding, databases: {} }))).toBeInstanceOf(
      InvalidArgumentError,
    )
    expect(await errorOf(() => call(ticketServerSql, { sequences: 'photos' }))).toBeInstanceOf(
      InvalidArgumentError,
    )
    expect(
      await errorOf(() => call(ticketServerSql, { sequences: ['photos'], dialect: 'oracle' })),
    ).toBeInstanceOf(InvalidArgumentError)
    expect(
      await errorOf(() => call(installMysql, pool, { sharding, shards: [0], onProgress: 'yes' })),
    ).toBeInstanceOf(InvalidArgumentError)
    expect(
      await errorOf(() => call(mysqlTriggerSql, { sharding, database: 5, table: 't', shard: 0 })),
    ).toBeInstanceOf(InvalidIdentifierError)
  })
})

describe('messages that say what to do', () => {
  it('TicketServerSource on a sequence nobody installed: run installTicketServers', async () => {
    const source = new TicketServerSource({ servers: [pool], sequence: 'never_installed' })
    const error = await errorOf(() => source.nextId(0))
    expect(error).toBeInstanceOf(ConfigurationError)
    expect(error.message).toContain(
      "Ticket sequence never_installed is not installed on ticket server 0 (database tickets) of sequence never_installed (no function tickets.next_never_installed): run installTicketServers({ servers, sequence: 'never_installed' }) with every server of the sequence.",
    )
    expect(error.message).not.toContain('installMysql')
    source.close()
  })

  it('installMysql through a connection to a database that does not exist: a sentence that says so', async () => {
    const missing = `${PREFIX}nowhere`
    const url = new URL(MYSQL_URL)
    url.pathname = `/${missing}`
    const stray = createPool(url.toString())
    try {
      const error = await errorOf(() =>
        installMysql(stray, { sharding, shards: [0], schemaPrefix: SHARDS }),
      )
      expect(error).toBeInstanceOf(ConfigurationError)
      expect(error.message).toBe(
        `Could not connect for the installation: the database the connection names does not exist on that server (Unknown database '${missing}'). Fix the database in the URL or pool options, or leave it out (mysql://user@host:3306/): every logical shard has a database of its own.`,
      )
      const source = new MysqlSource({ sharding, databases: stray, schemaPrefix: SHARDS })
      const fromSource = await errorOf(() => source.nextId(1))
      expect(fromSource).toBeInstanceOf(ConfigurationError)
      expect(fromSource.message).toContain('the database the connection names does not exist')
      await source.close()
    } finally {
      await stray.end()
    }
  })
})

describe('a context.query that does not return the rows of the statement it was given', () => {
  for (const [name, answer, type] of [
    ['null', null, SourceUnavailableError],
    ['a string', 'rows', SourceUnavailableError],
    ['rows without values', [{}], ConfigurationError],
    ['non-numeric values', [{ v: 'abc', layout: 'x', logical_shards: 'y' }], ConfigurationError],
  ] as const) {
    it(`${name}: a typed error, nothing issued`, async () => {
      const source = new MysqlSource({
        sharding,
        databases: pool,
        schemaPrefix: SHARDS,
        useContextQuery: true,
      })
      const query = async () => answer
      const error = await errorOf(() => call(source.nextIds.bind(source), 1, 2, { query }))
      expect(error).toBeInstanceOf(type)
      await source.close()
    })
  }
})
