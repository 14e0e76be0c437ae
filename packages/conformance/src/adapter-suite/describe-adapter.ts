import type { IdSource, Sharding } from '@shardflake/core'
import { afterAll, beforeAll, beforeEach, describe } from 'vitest'
import { type BlogThroughOrm, blogSchemaSql } from '../blog'
import { type Dialect, freshDatabase, type RawDatabase } from '../databases'
import { testSharding } from '../shardings'
import { CountingSource } from '../source-wrappers'
import { testKeyChanges, testSuppliedIds } from './checked-id-tests'
import { testConcurrentInserts } from './concurrency-tests'
import { testInsertPaths } from './insert-tests'
import { testRefusals } from './refusal-tests'
import { testShardRouting, testStoredShards } from './routing-tests'
import { testShardColumn } from './shard-column-tests'
import { AdapterSuiteState } from './suite-state'

/** What {@link describeAdapter} hands the adapter's `setup`. */
export interface AdapterSetupContext {
  /**
   * The source to configure the adapter with: the source under test, wrapped to count calls.
   * Its `sharding` is the suite's.
   */
  source: IdSource
  /** The application's sharding, the one the source was made with. */
  sharding: Sharding
  /** A fresh database with the blog tables; `raw.url` is the connection URL for the ORM. */
  raw: RawDatabase
}

/** How an adapter is put through {@link describeAdapter}. */
export interface AdapterSuiteOptions {
  dialect: Dialect
  /** Base name of the database the suite creates (unique per test file; the run tag is appended). */
  database: string
  /** The sharding of the run. @default testSharding() (Instagram layout, 64 logical shards) */
  sharding?: Sharding
  /** The source under test (in-process, PostgreSQL, MySQL, ...), made with `sharding`. */
  createSource: (raw: RawDatabase, sharding: Sharding) => IdSource | Promise<IdSource>
  /** Builds the ORM with the adapter around the given source. */
  setup: (context: AdapterSetupContext) => Promise<BlogThroughOrm>
  /** Concurrent loops in the concurrency test. @default 16 */
  concurrency?: number
}

/**
 * The contract of every ORM adapter, as tests, verified through raw SQL. One call per adapter x
 * source x database:
 *
 * ```ts
 * describeAdapter('TypeORM / PostgreSQL / in-process', {
 *   dialect: 'postgres',
 *   database: 'sf_typeorm_pg_inproc',
 *   createSource: (_raw, sharding) => new InProcessSource({ sharding, shards: 'all' }),
 *   setup: async ({ source, raw }) => blogOnTypeorm(raw, source),
 * })
 * ```
 */
export function describeAdapter(name: string, options: AdapterSuiteOptions): void {
  const sharding = options.sharding ?? testSharding()
  const s = new AdapterSuiteState(options.dialect, sharding, options.concurrency ?? 16)

  describe(`adapter conformance: ${name}`, () => {
    beforeAll(async () => {
      s.raw = await freshDatabase(options.dialect, options.database)
      for (const statement of blogSchemaSql(options.dialect)) await s.raw.query(statement)
      s.inner = await options.createSource(s.raw, sharding)
      if (!s.inner.sharding) {
        throw new Error(
          'The adapter suite needs a source whose IDs carry a layout (describePlainIdAdapter is for ticket servers).',
        )
      }
      sharding.checkSame(s.inner.sharding, 'the source under test')
      s.counting = new CountingSource(s.inner)
      s.blog = await options.setup({ source: s.counting, sharding, raw: s.raw })
      s.authors = []
      for (const email of [
        'ada@example.com',
        'grace@example.com',
        'linus@example.com',
        'margaret@example.com',
      ]) {
        s.authors.push(BigInt(await s.blog.createAuthor(email)))
      }
    })

    afterAll(async () => {
      await s.blog?.close()
      await s.inner?.close()
      await s.raw?.close()
    })

    beforeEach(() => s.counting?.reset())

    testShardRouting(s)
    testInsertPaths(s)
    testRefusals(s)
    testSuppliedIds(s)
    testKeyChanges(s)
    testShardColumn(s)
    testConcurrentInserts(s)
    testStoredShards(s)
  })
}
