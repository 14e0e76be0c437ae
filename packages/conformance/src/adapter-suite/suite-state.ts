import type { IdSource, Sharding } from '@shardflake/core'
import { type BlogThroughOrm, type OrmId, ormId } from '../blog'
import type { Dialect, RawDatabase } from '../databases'
import type { CountingSource } from '../source-wrappers'

/**
 * What the tests of {@link describeAdapter} share: the suite's settings, the database, source
 * and ORM its `beforeAll` sets up (read them inside tests only), and the queries the tests check
 * the writes with.
 */
export class AdapterSuiteState {
  /** The fresh database with the blog tables. */
  raw!: RawDatabase
  /** The source under test. */
  inner!: IdSource
  /** The source the adapter was given: {@link inner}, counting calls. */
  counting!: CountingSource
  /** The ORM with the adapter under test. */
  blog!: BlogThroughOrm
  /** The IDs of the four authors every test may write posts of. */
  authors: bigint[] = []

  constructor(
    readonly dialect: Dialect,
    readonly sharding: Sharding,
    /** Concurrent loops in the concurrency test. */
    readonly concurrency: number,
  ) {}

  /** The rows of `sql` on the raw connection. */
  rows(sql: string, params: readonly unknown[] = []): Promise<Record<string, unknown>[]> {
    return this.raw.query(sql, params)
  }

  /** The first column of the first row of `sql`, as a number (a `COUNT(*)`). */
  async count(sql: string, params: readonly unknown[] = []): Promise<number> {
    return Number(Object.values((await this.rows(sql, params))[0] ?? {})[0])
  }

  /** The logical shard an ID (of any type a row or ORM gives) decodes to. */
  shardOf(id: unknown): number {
    return this.sharding.shardOfId(String(id))
  }

  /** Placeholder `index` (1-based) of a statement in the dialect: `$1` or `?`. */
  p(index: number): string {
    return this.dialect === 'postgres' ? `$${index}` : '?'
  }

  /** `id` in the type of the ORM under test. */
  ormId(id: bigint): OrmId {
    return ormId(this.blog, id)
  }
}
