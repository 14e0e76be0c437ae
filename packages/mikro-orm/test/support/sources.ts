import type { Dialect, RawDatabase } from '@shardflake/conformance'
import type { IdSource, Sharding } from '@shardflake/core'
import { createMysqlPool, installTicketServers, TicketServerSource } from '@shardflake/mysql'

/**
 * The server's own source (`PostgresSource` / `MysqlSource`) for the matrix, once those packages
 * take a `sharding`; none until then.
 */
export function databaseSource(
  _dialect: Dialect,
): Record<string, (raw: RawDatabase, sharding: Sharding, name: string) => Promise<IdSource>> {
  return {}
}

/**
 * Flickr-style `TicketServerSource` over two ticket databases `${prefix}a` / `${prefix}b` on the
 * suite's server, offsets 1 and 2 (dropped on close).
 */
export async function ticketSource(raw: RawDatabase, prefix: string): Promise<IdSource> {
  const pool = await createMysqlPool({ uri: raw.url, connectionLimit: 8 })
  const databases = [`${prefix}a`, `${prefix}b`]
  for (const db of databases) await pool.query(`DROP DATABASE IF EXISTS \`${db}\``)
  const servers = databases.map((database) => ({ pool, database }))
  await installTicketServers({ servers, sequence: 'blog' })
  const source = new TicketServerSource({ servers, sequence: 'blog' })
  return {
    sharding: source.sharding,
    synchronous: false,
    nextId: (shard, context) => source.nextId(shard, context),
    nextIds: (shard, count, context) => source.nextIds(shard, count, context),
    async close() {
      await source.close()
      for (const db of databases) await pool.query(`DROP DATABASE IF EXISTS \`${db}\``)
      await pool.end()
    },
  }
}
