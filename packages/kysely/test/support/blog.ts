/**
 * The conformance blog written through Kysely with the plugin: the queries an application writes,
 * never around the plugin. IDs come back the way Kysely users get keys: `RETURNING` on
 * PostgreSQL; on MariaDB `insertId` for one row (the plugin's dialect sets it) and
 * `ids.assign()` first for several rows, or for every row when the plugin runs alone.
 */
import type { BlogThroughOrm, Dialect, OrmId } from '@shardflake/conformance'
import type { IdSource } from '@shardflake/core'
import { type ColumnType, type Insertable, Kysely, MysqlDialect, PostgresDialect } from 'kysely'
import mysql from 'mysql2'
import pg from 'pg'
import { type ShardedId, type ShardedIdsPlugin, shardedIds } from '../../src'

export interface BlogDatabase {
  authors: { id: ShardedId; email: string }
  /** `author_id` may be left out on insert, so the suite can try (and see it refused). */
  posts: { id: ShardedId; author_id: ColumnType<string, string | undefined, string>; title: string }
  comments: { id: ShardedId; post_id: string; body: string }
  /** The key takes a `number` on insert too, as from JavaScript callers (refused past 2^53). */
  keyed: {
    id: ColumnType<string, bigint | string | number | undefined, never>
    shard_key: string | null
  }
  /** `lshard` may be left out on insert: the plugin fills it with the shard of the row's ID. */
  tagged: { id: ShardedId; tenant: string; lshard: ColumnType<number, number | undefined, number> }
}

/** Kysely on the database at `url`: node-postgres, or mysql2 with BIGINT read as strings. */
export function blogDialect(dialect: Dialect, url: string) {
  if (dialect === 'postgres') {
    const pool = new pg.Pool({ connectionString: url, max: 8 })
    pool.on('error', () => undefined) // an idle connection ended by the server
    return new PostgresDialect({ pool })
  }
  const pool = mysql.createPool({
    uri: url,
    connectionLimit: 8,
    supportBigNumbers: true,
    bigNumberStrings: true,
  })
  return new MysqlDialect({ pool })
}

/** The plugin with the blog's rules. */
export function blogIds(source: IdSource): ShardedIdsPlugin<BlogDatabase> {
  return shardedIds<BlogDatabase>({
    source,
    tables: {
      authors: { shardBy: 'email' },
      posts: { sameShardAs: 'author_id' },
      comments: { sameShardAs: 'post_id' },
      keyed: { shardBy: 'shard_key' },
      // A shard column needs IDs that carry a shard: not with ticket servers.
      tagged: source.sharding ? { shardBy: 'tenant', shardColumn: 'lshard' } : undefined,
    },
  })
}

/**
 * The blog on Kysely. `wrapDialect: false` runs the plugin alone (synchronous sources only), as
 * on a Kysely instance made elsewhere: `db.withPlugin(ids)`.
 */
export async function kyselyBlog(
  dialect: Dialect,
  { source, raw }: { source: IdSource; raw: { url: string } },
  { wrapDialect = true } = {},
): Promise<BlogThroughOrm> {
  const ids = blogIds(source)
  const db = wrapDialect
    ? new Kysely<BlogDatabase>({
        dialect: ids.dialect(blogDialect(dialect, raw.url)),
        plugins: [ids],
      })
    : new Kysely<BlogDatabase>({ dialect: blogDialect(dialect, raw.url) }).withPlugin(ids)
  const returning = dialect === 'postgres'
  const insertId = !returning && wrapDialect

  type Table = keyof BlogDatabase
  /** Inserts one row through `trx` and returns its ID as the database stores it. */
  async function insertOne<T extends Table>(
    trx: Kysely<BlogDatabase>,
    table: T,
    row: Insertable<BlogDatabase[T]>,
  ): Promise<string> {
    if (returning) {
      const inserted = await trx
        .insertInto(table)
        .values(row)
        .returning('id')
        .executeTakeFirstOrThrow()
      return String(inserted.id)
    }
    if (insertId) {
      const result = await trx.insertInto(table).values(row).executeTakeFirstOrThrow()
      return String(result.insertId)
    }
    const [assigned] = await insertMany(trx, table, [row])
    return assigned!
  }
  /** Inserts rows in one INSERT through `trx` and returns their IDs, in order. */
  async function insertMany<T extends Table>(
    trx: Kysely<BlogDatabase>,
    table: T,
    rows: readonly Insertable<BlogDatabase[T]>[],
  ): Promise<string[]> {
    if (returning) {
      const inserted = await trx.insertInto(table).values(rows).returning('id').execute()
      return inserted.map((row) => String(row.id))
    }
    const assigned = await ids.assign(table, rows)
    await trx.insertInto(table).values(assigned).execute()
    return assigned.map((row) => String(row.id))
  }

  const blog: BlogThroughOrm = {
    idType: 'string',
    createAuthor: (email) => insertOne(db, 'authors', { email }),
    createPost: ({ authorId, title, id }) =>
      insertOne(db, 'posts', { author_id: optional(authorId), title, id: optional(id) }),
    createPosts: (posts) =>
      insertMany(
        db,
        'posts',
        posts.map(({ authorId, title }) => ({ author_id: String(authorId), title })),
      ),
    createPostWithComments: ({ authorId, title }, bodies) =>
      db.transaction().execute(async (trx) => {
        const postId = await insertOne(trx, 'posts', { author_id: String(authorId), title })
        const commentIds = await insertMany(
          trx,
          'comments',
          bodies.map((body) => ({ post_id: postId, body })),
        )
        return { postId, commentIds }
      }),
    async addCommentToLoadedPost(postId, body) {
      const post = await db
        .selectFrom('posts')
        .select('id')
        .where('id', '=', String(postId))
        .executeTakeFirstOrThrow()
      return insertOne(db, 'comments', { post_id: post.id, body })
    },
    createPostThenFail: ({ authorId, title }) =>
      db.transaction().execute(async (trx) => {
        await insertOne(trx, 'posts', { author_id: String(authorId), title })
        throw new Error('rolled back on purpose')
      }),
    createKeyed: (shardKey, id) =>
      insertOne(db, 'keyed', {
        ...(shardKey === undefined ? {} : { shard_key: shardKey }),
        ...(id === undefined ? {} : { id }),
      }),
    async upsertKeyed(id, shardKey) {
      const insert = db.insertInto('keyed').values({ id, shard_key: shardKey })
      await (dialect === 'postgres'
        ? insert.onConflict((oc) => oc.column('id').doUpdateSet({ shard_key: shardKey }))
        : insert.onDuplicateKeyUpdate({ shard_key: shardKey })
      ).execute()
    },
    createTagged: (tenant, lshard) =>
      insertOne(db, 'tagged', { tenant, ...(lshard === undefined ? {} : { lshard }) }),
    createTaggedMany: (tenants) =>
      insertMany(
        db,
        'tagged',
        tenants.map((tenant) => ({ tenant })),
      ),
    async updateTaggedShard(id, lshard) {
      await db.updateTable('tagged').set({ lshard }).where('id', '=', String(id)).execute()
    },
    close: () => db.destroy(),
  }
  return blog
}

function optional(id: OrmId | undefined): string | undefined {
  return id === undefined ? undefined : String(id)
}
