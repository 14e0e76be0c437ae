/**
 * The servers a quick start runs against: a fresh database on the shared PostgreSQL or MariaDB
 * (`PG_URL`, `MYSQL_URL`; named with the run tag, dropped afterwards), or a throwaway server of
 * its own when the quick start creates server-wide objects (MySQL shard databases `shard_<n>`)
 * or shows several servers (Redis). Either way two runs never meet.
 */
import {
  freshDatabase,
  type RawDatabase,
  redisCommand,
  startMariadb,
  startRedis,
} from '@shardflake/conformance'
import mysql from 'mysql2/promise'

/** A database a check reads with raw SQL (BIGINTs as decimal strings). */
export interface SqlDatabase {
  readonly kind: 'postgres' | 'mariadb'
  /** The URL handed to the quick start. */
  readonly url: string
  query(sql: string, params?: readonly unknown[]): Promise<Record<string, unknown>[]>
  /** Runs a script of several statements (a README's SQL block). */
  script(sql: string): Promise<void>
  close(): Promise<void>
}

/** A Redis server of the quick start's own. */
export interface RedisServer {
  readonly kind: 'redis'
  readonly url: string
  command(args: readonly string[]): Promise<unknown>
  close(): Promise<void>
}

export type Resource = SqlDatabase | RedisServer

/** How to make a resource; `name` is unique within the run (letters, digits, `_`). */
export interface ResourceSpec<R extends Resource> {
  readonly description: string
  create(name: string): Promise<R>
}

/** A new database on the shared PostgreSQL (`PG_URL`), dropped afterwards. */
export function postgresDatabase(): ResourceSpec<SqlDatabase> {
  return {
    description: 'a fresh PostgreSQL database',
    async create(name) {
      return sqlDatabase(await freshDatabase('postgres', name))
    },
  }
}

/** A new database on the shared MariaDB (`MYSQL_URL`), dropped afterwards. */
export function mariadbDatabase(): ResourceSpec<SqlDatabase> {
  return {
    description: 'a fresh MariaDB database',
    async create(name) {
      return sqlDatabase(await freshDatabase('mysql', name))
    },
  }
}

function sqlDatabase(raw: RawDatabase): SqlDatabase {
  return {
    kind: raw.dialect === 'postgres' ? 'postgres' : 'mariadb',
    url: raw.url,
    query: (sql, params) => raw.query(sql, params),
    // Both raw connections take several statements in one call (pg's simple protocol without
    // parameters; mysql2 with multipleStatements).
    script: async (sql) => {
      await raw.query(sql)
    },
    close: () => raw.close(),
  }
}

/**
 * A MariaDB server of its own (`mysql://root@127.0.0.1:<port>/test`): for quick starts that
 * create databases named `shard_<n>`, which live beside every other database of a server.
 */
export function mariadbServer(): ResourceSpec<SqlDatabase> {
  return {
    description: 'a MariaDB server of its own',
    async create(name) {
      const server = await startMariadb({ name })
      const pool = mysql.createPool({
        uri: server.url,
        connectionLimit: 2,
        supportBigNumbers: true,
        bigNumberStrings: true,
        multipleStatements: true,
      })
      return {
        kind: 'mariadb',
        url: server.url,
        async query(sql, params = []) {
          const [rows] = await pool.query(sql, [...params])
          return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : []
        },
        async script(sql) {
          await pool.query(sql)
        },
        async close() {
          await pool.end()
          await server.stop()
        },
      }
    },
  }
}

/** A Redis server of its own, without persistence (`redis://127.0.0.1:<port>`). */
export function redisServer(): ResourceSpec<RedisServer> {
  return {
    description: 'a Redis server of its own',
    async create(name) {
      const server = await startRedis({ name })
      return {
        kind: 'redis',
        url: server.url,
        command: (args) => redisCommand(server.port, [...args]),
        close: () => server.stop(),
      }
    },
  }
}
