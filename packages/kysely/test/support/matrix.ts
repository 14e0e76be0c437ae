import {
  asAsync,
  type Dialect,
  describeAdapter,
  type RawDatabase,
  testLeasedSharding,
  testSharding,
} from '@shardflake/conformance'
import { type IdSource, InProcessSource, type Sharding } from '@shardflake/core'
import { kyselyBlog } from './blog'
import { leasedSource, mysqlSource, postgresSource, redisSource } from './sources'

interface Run {
  createSource: (raw: RawDatabase, sharding: Sharding) => IdSource | Promise<IdSource>
  /** The plugin alone (`db.withPlugin(ids)`), without its dialect: synchronous sources. */
  pluginOnly?: boolean
  sharding?: Sharding
}

const inProcess = (_raw: RawDatabase, sharding: Sharding) =>
  new InProcessSource({ sharding, shards: 'all' })

/** Every kind of source on one server: the synchronous ones fill keys as Kysely compiles. */
function runs(dialect: Dialect): Record<string, Run> {
  const server = dialect === 'postgres' ? 'pg' : 'my'
  return {
    'in-process, plugin alone': { createSource: inProcess, pluginOnly: true },
    'in-process, with the dialect': { createSource: inProcess },
    'in-process behind promises': {
      createSource: (raw, sharding) => asAsync(inProcess(raw, sharding)),
    },
    ...(dialect === 'postgres'
      ? {
          'PostgresSource (through the query connection)': { createSource: postgresSource },
          'PostgresSource (prefetch)': {
            createSource: (raw, sharding) => postgresSource(raw, sharding, { prefetch: true }),
          },
        }
      : {
          // One database per logical shard: eight of them.
          MysqlSource: { createSource: mysqlSource, sharding: testSharding(8) },
        }),
    RedisSource: { createSource: (_raw, sharding) => redisSource(sharding, server) },
    LeasedSource: { createSource: leasedSource, sharding: testLeasedSharding(4) },
  }
}

/** The conformance suite for the Kysely plugin on one server, with every kind of source. */
export function describeMatrix(dialect: Dialect): void {
  const server = dialect === 'postgres' ? 'PostgreSQL' : 'MariaDB'
  for (const [kind, run] of Object.entries(runs(dialect))) {
    const tag = kind
      .replace(/[^a-z]/gi, '')
      .slice(0, 14)
      .toLowerCase()
    describeAdapter(`Kysely / ${server} / ${kind}`, {
      dialect,
      database: `sf_kysely_${dialect === 'postgres' ? 'pg' : 'my'}_${tag}`,
      ...(run.sharding ? { sharding: run.sharding } : {}),
      createSource: run.createSource,
      setup: (context) => kyselyBlog(dialect, context, { wrapDialect: !run.pluginOnly }),
    })
  }
}
