import { describeAdapter, type RawDatabase } from '@shardflake/conformance'
import { type IdSource, InProcessSource, instagram } from '@shardflake/core'
import { type BlogEntities, mikroBlog } from './blog'
import { mysqlSource, postgresSource, redisSource } from './sources'

const LOGICAL_SHARDS = { postgres: 16, mysql: 8 } as const

/**
 * The conformance suite for one entity form on both servers and every kind of source: the
 * in-process generator, the server's own routines (`PostgresSource` / `MysqlSource`) and Redis.
 * `form` names the runs and their databases (`sf_mikro_<form>_<server>_<source>`).
 */
export function describeMatrix(form: 'legacy' | 'define' | 'es', blog: BlogEntities): void {
  const label = { legacy: 'legacy decorators', define: 'defineEntity', es: 'standard decorators' }
  for (const dialect of ['postgres', 'mysql'] as const) {
    const server = dialect === 'postgres' ? 'PostgreSQL' : 'MariaDB'
    const logicalShards = LOGICAL_SHARDS[dialect]
    const sources: Record<
      string,
      (raw: RawDatabase, name: string) => IdSource | Promise<IdSource>
    > = {
      'in-process': () => new InProcessSource({ layout: instagram, shards: 'all' }),
      [dialect === 'postgres' ? 'PostgresSource' : 'MysqlSource']: (raw, name) =>
        dialect === 'postgres'
          ? postgresSource(raw, logicalShards)
          : mysqlSource(raw, `${name}_s`, logicalShards),
      RedisSource: (_raw, name) => redisSource(`${name}:`),
    }
    for (const [kind, create] of Object.entries(sources)) {
      const name = `sf_mikro_${form}_${dialect === 'postgres' ? 'pg' : 'my'}_${kind
        .replace(/Source$/, '')
        .replace('-', '')
        .toLowerCase()}`
      describeAdapter(`MikroORM / ${server} / ${kind} / ${label[form]}`, {
        dialect,
        database: name,
        postsFollowAuthor: true,
        logicalShards,
        createSource: (raw) => create(raw, name),
        setup: (context) => mikroBlog(dialect, blog, context),
      })
    }
  }
}
