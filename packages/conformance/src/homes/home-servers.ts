import type { Sharding } from '@shardflake/core'
import mysql from 'mysql2/promise'
import pg from 'pg'
import type { Dialect } from '../databases'
import { startMariadb } from '../servers/mariadb'
import { startPostgres } from '../servers/postgres'
import type { ThrowawayServer } from '../servers/throwaway-server'

/** One server of {@link HomeServers}: its name, a URL of its test database, raw SQL on it. */
export interface HomeServer {
  /** `'a'`, `'b'`, `'c'`: the name the shard map and the directory use. */
  readonly name: string
  /** A connection URL of the server's test database (PostgreSQL `postgres`, MariaDB `test`). */
  readonly url: string
  /** SQL run outside the code under test (the verifier). BIGINT values come back as strings. */
  query(sql: string, params?: readonly unknown[]): Promise<Record<string, unknown>[]>
  /** The server process, when this run started it (to pause, kill or restart it). */
  readonly process: ThrowawayServer | undefined
}

/** A row found on a server that is not its shard's home. */
export interface MisplacedRow {
  readonly server: string
  readonly id: string
  readonly shard: number
  readonly home: string
}

/**
 * Several database servers of one dialect, for tests of rows living on their shard's server:
 * raw SQL on each, and the check that every row of a table is on its home.
 */
export interface HomeServers {
  readonly dialect: Dialect
  readonly servers: readonly HomeServer[]
  /** Each server's URL by name (what a globalSetup hands to the tests). */
  readonly urls: Readonly<Record<string, string>>
  /** The server with this name. @throws Error for an unknown name */
  server(name: string): HomeServer
  /** Runs the same SQL on every server (the schema every server holds). */
  everywhere(sql: string): Promise<void>
  /**
   * Reads every row's ID of `table` on every server (raw SQL) and returns those whose logical
   * shard's home (by `homeOf`) is another server: `[]` when every row is at home. `counts` gets
   * the number of rows read on each server.
   */
  misplaced(options: {
    table: string
    sharding: Sharding
    homeOf: (shard: number) => string
    idColumn?: string
    counts?: Record<string, number>
  }): Promise<MisplacedRow[]>
  /** Ends the connections, and stops the servers this run started. */
  close(): Promise<void>
}

const DEFAULT_NAMES = ['a', 'b', 'c']
const SAFE_NAME = /^[a-z_][a-z0-9_]{0,62}$/

/**
 * Starts throwaway servers of `dialect` on free ports (three, named a, b and c, unless `names`
 * says otherwise), in parallel. Call it in a test file, or in a vitest globalSetup and hand the
 * `urls` to the tests (`connectHomeServers`).
 */
export async function startHomeServers(
  dialect: Dialect,
  options: { readonly names?: readonly string[] } = {},
): Promise<HomeServers> {
  const names = options.names ?? DEFAULT_NAMES
  const start = dialect === 'postgres' ? startPostgres : startMariadb
  const started = await Promise.allSettled(names.map((name) => start({ name: `home-${name}` })))
  const processes = started.flatMap((result) =>
    result.status === 'fulfilled' ? [result.value] : [],
  )
  const failed = started.find((result) => result.status === 'rejected')
  if (failed) {
    await Promise.all(processes.map((server) => server.stop()))
    throw failed.reason
  }
  return connect(
    dialect,
    names.map((name, index) => ({ name, url: processes[index]!.url, process: processes[index] })),
  )
}

/** Raw connections to servers started elsewhere (a globalSetup's {@link startHomeServers}). */
export function connectHomeServers(
  dialect: Dialect,
  urls: Readonly<Record<string, string>>,
): HomeServers {
  return connect(
    dialect,
    Object.entries(urls).map(([name, url]) => ({ name, url, process: undefined })),
  )
}

function connect(
  dialect: Dialect,
  given: readonly { name: string; url: string; process: ThrowawayServer | undefined }[],
): HomeServers {
  const ends: (() => Promise<void>)[] = []
  const servers: HomeServer[] = given.map(({ name, url, process }) => {
    if (dialect === 'postgres') {
      // A statement stuck behind a lock fails after a minute instead of stalling the test.
      const pool = new pg.Pool({ connectionString: url, max: 3, statement_timeout: 60_000 })
      pool.on('error', () => undefined)
      ends.push(() => pool.end())
      return {
        name,
        url,
        process,
        async query(sql, params = []) {
          return (await pool.query(sql, [...params])).rows
        },
      }
    }
    const pool = mysql.createPool({
      uri: url,
      connectionLimit: 3,
      supportBigNumbers: true,
      bigNumberStrings: true,
      multipleStatements: true,
    })
    ends.push(() => pool.end())
    return {
      name,
      url,
      process,
      async query(sql, params = []) {
        const [rows] = await pool.query(sql, [...params])
        return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : []
      },
    }
  })
  const byName = new Map(servers.map((server) => [server.name, server]))
  return {
    dialect,
    servers,
    urls: Object.fromEntries(servers.map((server) => [server.name, server.url])),
    server(name) {
      const server = byName.get(name)
      if (!server) throw new Error(`No home server named ${name}.`)
      return server
    },
    async everywhere(sql) {
      await Promise.all(servers.map((server) => server.query(sql)))
    },
    async misplaced({ table, sharding, homeOf, idColumn = 'id', counts }) {
      for (const name of [table, idColumn]) {
        if (!SAFE_NAME.test(name)) throw new Error(`Not a plain identifier: ${name}`)
      }
      const cast = dialect === 'postgres' ? `${idColumn}::text` : `CAST(${idColumn} AS CHAR)`
      const found: MisplacedRow[] = []
      for (const server of servers) {
        const rows = await server.query(`SELECT ${cast} AS id FROM ${table}`)
        if (counts) counts[server.name] = rows.length
        for (const { id } of rows as { id: string }[]) {
          const shard = shardBits(sharding, id)
          const home = homeOf(shard)
          if (home !== server.name) found.push({ server: server.name, id, shard, home })
        }
      }
      return found
    },
    async close() {
      await Promise.all(ends.map((end) => end().catch(() => undefined)))
      await Promise.all(given.map(({ process }) => process?.stop()))
    },
  }
}

/**
 * The logical shard in an ID's bits, read here from the layout's field positions and NOT with
 * core's `shardOf`, so the check does not trust the code it checks.
 */
export function shardBits(sharding: Sharding, id: string | bigint): number {
  const { layout } = sharding
  const unsigned = BigInt.asUintN(64, BigInt(id))
  return Number((unsigned >> layout.shifts.shard) & ((1n << BigInt(layout.shardBits)) - 1n))
}
