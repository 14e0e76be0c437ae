import { asAsync, describeAdapter, type RawDatabase, testSharding } from '@shardflake/conformance'
import { type IdSource, InProcessSource, type Sharding } from '@shardflake/core'
import { type BlogEntities, mikroBlog } from './blog'
import { databaseSources } from './sources'

type SourceMaker = (
  raw: RawDatabase,
  sharding: Sharding,
  name: string,
) => IdSource | Promise<IdSource>

/**
 * The conformance suite for one entity form on both servers and every kind of source: the
 * in-process generator (at `em.create()`), the same behind promises (the flush path database
 * sources take) and the server's own routines. `form` names the runs and their databases.
 */
export function describeMatrix(form: 'legacy' | 'define' | 'es', blog: BlogEntities): void {
  const label = { legacy: 'legacy decorators', define: 'defineEntity', es: 'standard decorators' }
  const inProcess: SourceMaker = (_raw, sharding) =>
    new InProcessSource({ sharding, shards: 'all' })
  for (const dialect of ['postgres', 'mysql'] as const) {
    const server = dialect === 'postgres' ? 'PostgreSQL' : 'MariaDB'
    const sources: Record<string, SourceMaker> = {
      'in-process': inProcess,
      'in-process behind promises': (raw, sharding, name) =>
        asAsync(inProcess(raw, sharding, name) as IdSource),
      ...databaseSources(dialect),
    }
    for (const [kind, create] of Object.entries(sources)) {
      const tag = kind
        .replace(/[^a-z]/gi, '')
        .slice(0, 12)
        .toLowerCase()
      const name = `sf_mikro_${form}_${dialect === 'postgres' ? 'pg' : 'my'}_${tag}`
      describeAdapter(`MikroORM / ${server} / ${kind} / ${label[form]}`, {
        dialect,
        database: name,
        // MysqlSource installs one database per logical shard: eight of them.
        ...(kind === 'MysqlSource' ? { sharding: testSharding(8) } : {}),
        createSource: (raw, sharding) => create(raw, sharding, name),
        setup: (context) => mikroBlog(dialect, blog, context),
      })
    }
  }
}
