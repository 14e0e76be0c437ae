/**
 * The conformance suite for TypeORM on one database with the in-process source, in its variants:
 * synchronous and behind promises, string and bigint IDs, parents named by relation or by
 * foreign-key column. Shared by both TypeORM majors.
 */
import { asAsync, type Dialect, describeAdapter } from '@shardflake/conformance'
import { InProcessSource } from '@shardflake/core'
import { type BlogOptions, blogOnTypeorm } from './blog'

const variants: [string, boolean, BlogOptions][] = [
  ['in-process', false, {}],
  ['async in-process, parents by foreign-key column', true, { parents: 'column' }],
  ['in-process, bigint IDs', false, { idType: 'bigint' }],
  [
    'async in-process, bigint IDs, parents by column',
    true,
    { idType: 'bigint', parents: 'column' },
  ],
]

export function describeInProcess(major: string, dialect: Dialect): void {
  const database = dialect === 'postgres' ? 'PostgreSQL' : 'MariaDB'
  for (const [name, async, options] of variants) {
    describeAdapter(`TypeORM ${major} / ${database} / ${name}`, {
      dialect,
      database: `sf_typeorm_${major.replace(/\W/g, '')}_${dialect.slice(0, 2)}`,
      createSource: (_raw, sharding) => {
        const source = new InProcessSource({ sharding, shards: 'all' })
        return async ? asAsync(source) : source
      },
      setup: ({ raw, source }) => blogOnTypeorm(raw, source, options),
    })
  }
}
