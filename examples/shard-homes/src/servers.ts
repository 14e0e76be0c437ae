/**
 * Three throwaway database servers (a, b and c) for the example, the tables every server holds,
 * and a statement counter that reads what each server executed (its own counters, not the
 * ORM's), so "a read by ID goes to one server" is checked from the servers' side.
 */
import { existsSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import {
  connectHomeServers,
  type Dialect,
  type HomeServers,
  startHomeServers,
} from '@shardflake/conformance'
import { defineSharding, instagram, ShardMap } from '@shardflake/core'

/** The example's sharding: 64 logical shards, the Instagram layout (41/13/10). */
export const sharding = defineSharding({ layout: instagram, logicalShards: 64 })

/** Where the 64 logical shards live: 0-20 on a, 21-41 on b, 42-63 on c. */
export const shardMap = new ShardMap(sharding, [
  { from: 0, to: 20, target: 'a' },
  { from: 21, to: 41, target: 'b' },
  { from: 42, to: 63, target: 'c' },
])

/** The example's dialects, by the name its command line uses. */
export type ExampleDialect = 'postgres' | 'mariadb'

/** Tables, the same on every server. Foreign keys hold: a post and its user share a server. */
function schemaSql(dialect: ExampleDialect): string[] {
  if (dialect === 'postgres') {
    return [
      'CREATE TABLE users (id bigint PRIMARY KEY, email text NOT NULL UNIQUE)',
      'CREATE TABLE posts (id bigint PRIMARY KEY, user_id bigint NOT NULL REFERENCES users (id), title text NOT NULL)',
      'CREATE TABLE comments (id bigint PRIMARY KEY, post_id bigint NOT NULL REFERENCES posts (id), body text NOT NULL)',
    ]
  }
  return [
    'CREATE TABLE users (id BIGINT PRIMARY KEY, email VARCHAR(191) NOT NULL UNIQUE) ENGINE=InnoDB',
    'CREATE TABLE posts (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, title VARCHAR(255) NOT NULL, FOREIGN KEY (user_id) REFERENCES users (id)) ENGINE=InnoDB',
    'CREATE TABLE comments (id BIGINT PRIMARY KEY, post_id BIGINT NOT NULL, body VARCHAR(255) NOT NULL, FOREIGN KEY (post_id) REFERENCES posts (id)) ENGINE=InnoDB',
  ]
}

/** Statements of each kind a server executed. */
export type StatementCounts = Record<string, { select: number; insert: number; other: number }>

/** Counts, on each server, the statements run in one database. */
export interface StatementCounter {
  /** Starts counting from now. */
  mark(): Promise<void>
  /** What each server executed in the database since {@link mark}. */
  since(): Promise<StatementCounts>
}

/** The three servers, each with a database per use (one per ORM, one for the benchmark). */
export interface ExampleServers {
  readonly dialect: ExampleDialect
  readonly raw: HomeServers
  /**
   * Creates database `name` on every server with the tables, and returns each server's URL of
   * it, raw SQL on it (for the checks) and a statement counter.
   */
  database(name: string): Promise<ExampleDatabase>
  /**
   * Turns PostgreSQL's statement log (what the counters read) on or off; the benchmark times
   * writes without it. MariaDB's counters cost nothing and stay on.
   */
  logStatements(on: boolean): Promise<void>
  close(): Promise<void>
}

/** One database on each of the three servers. */
export interface ExampleDatabase {
  readonly name: string
  readonly urls: Readonly<Record<string, string>>
  /** Raw SQL on each server's copy of the database (not through an ORM). */
  readonly checker: HomeServers
  readonly counter: StatementCounter
  close(): Promise<void>
}

const conformanceDialect = (dialect: ExampleDialect): Dialect =>
  dialect === 'postgres' ? 'postgres' : 'mysql'

/**
 * Starts three servers of `dialect` on free ports (a, b, c). PostgreSQL servers log every
 * statement with its database (`log_statement = 'all'`), which the counter reads; MariaDB's are
 * counted by its `Com_*` status counters.
 */
export async function startExampleServers(dialect: ExampleDialect): Promise<ExampleServers> {
  const raw = await startHomeServers(conformanceDialect(dialect))
  const logStatements = async (on: boolean) => {
    if (dialect !== 'postgres') return
    for (const server of raw.servers) {
      await server.query(`ALTER SYSTEM SET log_statement = '${on ? 'all' : 'none'}'`)
      await server.query("ALTER SYSTEM SET log_line_prefix = '[%d] '")
      await server.query('SELECT pg_reload_conf()')
    }
    // Sessions read the new setting when the reload signal reaches them.
    await new Promise((resolve) => setTimeout(resolve, 300))
  }
  try {
    await logStatements(true)
  } catch (error) {
    await raw.close()
    throw error
  }
  return {
    dialect,
    raw,
    async database(name) {
      if (!/^[a-z][a-z0-9_]*$/.test(name)) throw new Error(`Not a plain database name: ${name}`)
      const urls: Record<string, string> = {}
      for (const server of raw.servers) {
        await server.query(`DROP DATABASE IF EXISTS ${name}`)
        await server.query(`CREATE DATABASE ${name}`)
        const url = new URL(server.url)
        url.pathname = `/${name}`
        urls[server.name] = url.toString()
      }
      const checker = connectHomeServers(conformanceDialect(dialect), urls)
      for (const sql of schemaSql(dialect)) await checker.everywhere(sql)
      const counter = dialect === 'postgres' ? postgresCounter(raw, name) : mariadbCounter(checker)
      return { name, urls, checker, counter, close: () => checker.close() }
    },
    logStatements,
    close: () => raw.close(),
  }
}

const LOGGED = /^\[([^\]]*)\] LOG: {2}(?:statement|execute [^:]*): \s*(?:\/\*.*?\*\/\s*)?(\w+)/

/** PostgreSQL: the statements its log shows for `database`, from each server's log file. */
function postgresCounter(raw: HomeServers, database: string): StatementCounter {
  const logs = raw.servers.map((server) => {
    const directory = server.process?.directory
    if (!directory) throw new Error(`Server ${server.name} was not started here: no log to read.`)
    return { name: server.name, file: join(directory, 'server.log'), offset: 0 }
  })
  const size = (file: string) => (existsSync(file) ? statSync(file).size : 0)
  return {
    async mark() {
      for (const log of logs) log.offset = size(log.file)
    },
    async since() {
      const counts: StatementCounts = {}
      for (const log of logs) {
        const text = readFileSync(log.file).subarray(log.offset).toString('utf8')
        const count = { select: 0, insert: 0, other: 0 }
        for (const line of text.split('\n')) {
          const match = LOGGED.exec(line)
          if (!match || match[1] !== database) continue
          const verb = match[2]!.toLowerCase()
          if (verb === 'select') count.select++
          else if (verb === 'insert') count.insert++
          else count.other++
        }
        counts[log.name] = count
      }
      return counts
    },
  }
}

/** MariaDB: its global `Com_select`, `Com_insert`, `Com_update`/`Com_delete` counters. */
function mariadbCounter(checker: HomeServers): StatementCounter {
  const read = async () => {
    const out: StatementCounts = {}
    for (const server of checker.servers) {
      const rows = (await server.query(
        "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_select', 'Com_insert', 'Com_update', 'Com_delete')",
      )) as { Variable_name: string; Value: string }[]
      const value = (name: string) =>
        Number(rows.find((row) => row.Variable_name === name)?.Value ?? 0)
      out[server.name] = {
        select: value('Com_select'),
        insert: value('Com_insert'),
        other: value('Com_update') + value('Com_delete'),
      }
    }
    return out
  }
  let start: StatementCounts = {}
  return {
    async mark() {
      start = await read()
    },
    async since() {
      const now = await read()
      return Object.fromEntries(
        Object.entries(now).map(([name, count]) => {
          const before = start[name] ?? { select: 0, insert: 0, other: 0 }
          return [
            name,
            {
              select: count.select - before.select,
              insert: count.insert - before.insert,
              other: count.other - before.other,
            },
          ]
        }),
      )
    },
  }
}

/** The servers that executed any statement, in a {@link StatementCounts}. */
export function serversHit(counts: StatementCounts): string[] {
  return Object.entries(counts)
    .filter(([, count]) => count.select + count.insert + count.other > 0)
    .map(([name]) => name)
}
