import {
  asAsync,
  type Dialect,
  describeAdapter,
  describePlainIdAdapter,
  testSharding,
} from '@shardflake/conformance'
import type { IdSource } from '@shardflake/core'
import { type BlogOptions, blogOnSequelize } from './blog'
import {
  inProcessSource,
  leasedSharding,
  leasedSource,
  mysqlSource,
  postgresSource,
  redisSource,
  type SourceMaker,
  ticketSource,
} from './sources'

/** Each source, and the blog variant it runs with: between them every insert path on each server. */
const matrix: [string, SourceMaker, BlogOptions][] = [
  ['in-process', inProcessSource, {}],
  [
    'async in-process, bulk paths, parents by column',
    async (raw, sharding) => asAsync(await inProcessSource(raw, sharding)),
    { parents: 'column', writes: 'bulk' },
  ],
  ['PostgresSource', postgresSource, {}],
  ['MysqlSource, parents by column', mysqlSource, { parents: 'column' }],
  ['RedisSource, bulk paths', redisSource, { writes: 'bulk' }],
  ['LeasedSource, parents by column', leasedSource, { parents: 'column' }],
]

/**
 * The conformance suite for Sequelize on one server with every kind of source, and the plain-ID
 * suite with ticket servers. `driver` picks the MariaDB client (mysql2 or mariadb); `only`
 * limits the sources (by name prefix).
 */
export function describeMatrix(
  dialect: Dialect,
  driver: 'mysql' | 'mariadb' = 'mysql',
  only?: readonly string[],
): void {
  const server =
    dialect === 'postgres'
      ? 'PostgreSQL'
      : driver === 'mysql'
        ? 'MariaDB'
        : 'MariaDB (mariadb driver)'
  const tag = dialect === 'postgres' ? 'pg' : driver === 'mysql' ? 'my' : 'md'
  for (const [name, create, options] of matrix) {
    if (only && !only.some((prefix) => name.startsWith(prefix))) continue
    const kind = name.split(/[ ,]/)[0]!.replace(/\W/g, '').toLowerCase().slice(0, 10)
    describeAdapter(`Sequelize / ${server} / ${name}`, {
      dialect,
      database: `sf_sqlz_${tag}_${kind}`,
      // MysqlSource installs a database per logical shard: eight of them.
      ...(create === mysqlSource ? { sharding: testSharding(8) } : {}),
      ...(create === leasedSource ? { sharding: leasedSharding } : {}),
      createSource: (raw, sharding): Promise<IdSource> | IdSource => create(raw, sharding),
      setup: ({ raw, source }) => blogOnSequelize(raw, source, { ...options, driver }),
    })
  }
  if (only) return
  describePlainIdAdapter(`Sequelize / ${server} / TicketServerSource`, {
    dialect,
    database: `sf_sqlz_${tag}_tickets`,
    createSource: ticketSource,
    setup: ({ raw, source }) => blogOnSequelize(raw, source, { driver }),
  })
}
