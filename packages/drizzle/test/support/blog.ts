/**
 * The conformance blog on Drizzle: its tables and the `BlogThroughOrm` the suite drives. Written
 * against what Drizzle 0.45 and 1.0 share, so the files of both versions use it (the 1.0 project
 * resolves `drizzle-orm` to the 1.0 install).
 *
 * Drizzle has no nested writes and no collections: a post "with its comments" is the post's row,
 * then the comments' rows, in one transaction, each placed by `sameShardAs` on its foreign key.
 */
import type { BlogThroughOrm, Dialect, OrmId, RawDatabase } from '@shardflake/conformance'
import type { IdSource } from '@shardflake/core'
import { type Column, eq } from 'drizzle-orm'
import {
  int,
  type MySqlTable,
  bigint as mysqlBigint,
  mysqlTable,
  varchar,
} from 'drizzle-orm/mysql-core'
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2'
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres'
import {
  integer,
  type PgColumn,
  type PgTable,
  bigint as pgBigint,
  pgTable,
  text,
} from 'drizzle-orm/pg-core'
import mysql from 'mysql2/promise'
import pg from 'pg'
import { type ShardedIdRule, shardedId, shardedIds } from '../../src'

type Row = Record<string, unknown>
type AnyTable = PgTable | MySqlTable

/** The blog's four tables in one dialect, with the columns the blog queries by. */
export interface BlogTables {
  readonly dialect: Dialect
  /** What the sharded IDs (and the foreign keys holding them) carry. */
  readonly idType: 'bigint' | 'string'
  readonly authors: AnyTable
  readonly posts: AnyTable
  readonly comments: AnyTable
  readonly keyed: AnyTable
  /** `{ shardBy: 'tenant', shardColumn: 'lshard' }`. */
  readonly tagged: AnyTable
  readonly postId: Column
  readonly commentPostId: Column
}

/** How the rules name their field: by column key (`'authorId'`) or by a function of the row. */
export type RuleStyle = 'names' | 'functions'

/** The rules of the blog, in one style. */
export function blogRules(style: RuleStyle = 'names') {
  const byName = style === 'names'
  return {
    author: { shardBy: byName ? 'email' : (row: Row) => row.email as string } as ShardedIdRule,
    post: {
      sameShardAs: byName ? 'authorId' : (row: Row) => row.authorId as bigint,
    } as ShardedIdRule,
    comment: {
      sameShardAs: byName ? 'postId' : (row: Row) => row.postId as bigint,
    } as ShardedIdRule,
    keyed: { shardBy: byName ? 'shardKey' : (row: Row) => row.shardKey as string } as ShardedIdRule,
    tagged: {
      shardBy: byName ? 'tenant' : (row: Row) => row.tenant as string,
      shardColumn: 'lshard',
    } as ShardedIdRule,
  }
}

/** The blog's tables with `bigint({ mode: 'bigint' })` keys. */
export function blogTables(dialect: Dialect, style: RuleStyle = 'names'): BlogTables {
  const rules = blogRules(style)
  if (dialect === 'postgres') {
    const id = () => pgBigint({ mode: 'bigint' })
    const authors = pgTable('authors', {
      id: shardedId(id(), rules.author).primaryKey(),
      email: text().notNull().unique(),
    })
    const posts = pgTable('posts', {
      id: shardedId(id(), rules.post).primaryKey(),
      authorId: pgBigint('author_id', { mode: 'bigint' })
        .notNull()
        .references(() => authors.id),
      title: text().notNull(),
    })
    const comments = pgTable('comments', {
      id: shardedId(id(), rules.comment).primaryKey(),
      postId: pgBigint('post_id', { mode: 'bigint' })
        .notNull()
        .references(() => posts.id),
      body: text().notNull(),
    })
    const keyed = pgTable('keyed', {
      id: shardedId(id(), rules.keyed).primaryKey(),
      shardKey: text('shard_key'),
    })
    const tagged = pgTable('tagged', {
      id: shardedId(id(), rules.tagged).primaryKey(),
      tenant: text().notNull(),
      lshard: integer().notNull(),
    })
    return {
      dialect,
      idType: 'bigint',
      authors,
      posts,
      comments,
      keyed,
      tagged,
      postId: posts.id,
      commentPostId: comments.postId,
    }
  }
  const id = () => mysqlBigint({ mode: 'bigint' })
  const authors = mysqlTable('authors', {
    id: shardedId(id(), rules.author).primaryKey(),
    email: varchar({ length: 200 }).notNull().unique(),
  })
  const posts = mysqlTable('posts', {
    id: shardedId(id(), rules.post).primaryKey(),
    authorId: mysqlBigint('author_id', { mode: 'bigint' })
      .notNull()
      .references(() => authors.id),
    title: varchar({ length: 200 }).notNull(),
  })
  const comments = mysqlTable('comments', {
    id: shardedId(id(), rules.comment).primaryKey(),
    postId: mysqlBigint('post_id', { mode: 'bigint' })
      .notNull()
      .references(() => posts.id),
    body: varchar({ length: 200 }).notNull(),
  })
  const keyed = mysqlTable('keyed', {
    id: shardedId(id(), rules.keyed).primaryKey(),
    shardKey: varchar('shard_key', { length: 200 }),
  })
  const tagged = mysqlTable('tagged', {
    id: shardedId(id(), rules.tagged).primaryKey(),
    tenant: varchar({ length: 200 }).notNull(),
    lshard: int().notNull(),
  })
  return {
    dialect,
    idType: 'bigint',
    authors,
    posts,
    comments,
    keyed,
    tagged,
    postId: posts.id,
    commentPostId: comments.postId,
  }
}

/** What the blog does with a Drizzle database, the same in both dialects. */
export interface BlogDb {
  /** The Drizzle database itself. */
  readonly drizzle: object
  insert(table: AnyTable, rows: Row[]): Promise<unknown>
  /** Drizzle's insert query itself, not yet awaited (Drizzle builds and runs it when awaited). */
  query(table: AnyTable, rows: Row[]): PromiseLike<unknown>
  /** Inserts and returns each row's `id` as Drizzle reports it: `returning()`, `$returningId()`. */
  insertReturningIds(table: AnyTable, rows: Row[]): Promise<unknown[]>
  /** A prepared insert of one row of `values` (placeholders allowed). */
  prepareInsert(
    table: AnyTable,
    values: Row,
  ): { execute(placeholders?: Record<string, unknown>): Promise<unknown> }
  /**
   * Drizzle's upsert of `rows`, conflicting on the ID and setting `set`: `onConflictDoUpdate`
   * (PostgreSQL), `onDuplicateKeyUpdate` (MySQL/MariaDB).
   */
  upsert(table: AnyTable, rows: Row[], set: Row): Promise<unknown>
  /** `update(table).set(set).where(eq(table.id, id))`. */
  update(table: AnyTable, set: Row, id: unknown): Promise<unknown>
  /** The rows of `table` whose `column` equals `value`. */
  select(table: AnyTable, column: Column, value: unknown): Promise<Row[]>
  transaction(work: (tx: Pick<BlogDb, 'insert' | 'select'>) => Promise<void>): Promise<void>
  close(): Promise<void>
}

/**
 * Drizzle on the suite's database through its usual driver: node-postgres, or mysql2 with the
 * options that keep BIGINT exact.
 */
export function connect(raw: RawDatabase): BlogDb {
  if (raw.dialect === 'postgres') {
    const pool = new pg.Pool({ connectionString: raw.url, max: 8 })
    pool.on('error', () => undefined) // an idle connection ended by the server
    const db = pgDrizzle({ client: pool })
    type Q = Pick<typeof db, 'insert' | 'select'>
    const on = (q: Q): Pick<BlogDb, 'insert' | 'select'> => ({
      insert: async (table, rows) => {
        await q.insert(table as PgTable).values(rows)
      },
      select: (table, column, value) =>
        q
          .select()
          .from(table as PgTable)
          .where(eq(column, value)),
    })
    let statements = 0
    return {
      drizzle: db,
      ...on(db),
      query: (table, rows) => db.insert(table as PgTable).values(rows),
      insertReturningIds: async (table, rows) =>
        (
          await db
            .insert(table as PgTable)
            .values(rows)
            .returning()
        ).map((row) => (row as Row).id),
      prepareInsert: (table, values) =>
        db
          .insert(table as PgTable)
          .values(values)
          .prepare(`sf_insert_${++statements}`),
      upsert: async (table, rows, set) => {
        const target = (table as PgTable & { id: PgColumn }).id
        await db
          .insert(table as PgTable)
          .values(rows)
          .onConflictDoUpdate({ target, set })
      },
      update: async (table, set, id) => {
        const key = (table as PgTable & { id: PgColumn }).id
        await db
          .update(table as PgTable)
          .set(set)
          .where(eq(key, id))
      },
      transaction: (work) => db.transaction((tx) => work(on(tx))),
      close: () => pool.end(),
    }
  }
  const pool = mysql.createPool({
    uri: raw.url,
    connectionLimit: 8,
    supportBigNumbers: true,
    bigNumberStrings: true,
  })
  const db = mysqlDrizzle({ client: pool })
  type Q = Pick<typeof db, 'insert' | 'select'>
  const on = (q: Q): Pick<BlogDb, 'insert' | 'select'> => ({
    insert: async (table, rows) => {
      await q.insert(table as MySqlTable).values(rows)
    },
    select: (table, column, value) =>
      q
        .select()
        .from(table as MySqlTable)
        .where(eq(column, value)),
  })
  return {
    drizzle: db,
    ...on(db),
    query: (table, rows) => db.insert(table as MySqlTable).values(rows),
    insertReturningIds: async (table, rows) =>
      (
        await db
          .insert(table as MySqlTable)
          .values(rows)
          .$returningId()
      ).map((row) => (row as Row).id),
    prepareInsert: (table, values) =>
      db
        .insert(table as MySqlTable)
        .values(values)
        .prepare(),
    upsert: async (table, rows, set) => {
      await db
        .insert(table as MySqlTable)
        .values(rows)
        .onDuplicateKeyUpdate({ set })
    },
    update: async (table, set, id) => {
      const key = (table as MySqlTable & { id: Column }).id
      await db
        .update(table as MySqlTable)
        .set(set)
        .where(eq(key, id))
    },
    transaction: (work) => db.transaction((tx) => work(on(tx))),
    close: () => pool.end(),
  }
}

/**
 * The suite's blog, written through Drizzle inserts, with the rows given their IDs by
 * `ids.assign(table, rows)` first (the explicit step every per-row rule needs).
 */
export async function blogOnDrizzle(
  raw: RawDatabase,
  source: IdSource,
  tables: BlogTables = blogTables(raw.dialect),
): Promise<BlogThroughOrm> {
  const db = connect(raw)
  // A shard column needs IDs that carry a shard: ticket servers get the schema without it.
  const { tagged, ...untagged } = tables
  const schema = source.sharding ? { ...tables } : { ...untagged }
  const ids = shardedIds(db.drizzle, { source, schema })
  const { authors, posts, comments, keyed } = tables
  const id = (row: Row): OrmId => row.id as OrmId
  const post = (fields: { authorId: OrmId | undefined; title: string; id?: OrmId }): Row => ({
    authorId: fields.authorId,
    title: fields.title,
    ...(fields.id === undefined ? {} : { id: fields.id }),
  })
  return {
    idType: tables.idType,
    async createAuthor(email) {
      const [row] = await ids.assign(authors, [{ email }])
      await db.insert(authors, [row!])
      return id(row!)
    },
    async createPost(fields) {
      const row = await ids.assign(posts, post(fields))
      await db.insert(posts, [row])
      return id(row)
    },
    async createPosts(list) {
      const rows = await ids.assign(posts, list.map(post))
      await db.insert(posts, rows)
      return rows.map(id)
    },
    async createPostWithComments(fields, bodies) {
      let postId: OrmId | undefined
      let commentIds: OrmId[] = []
      await db.transaction(async (tx) => {
        const parent = await ids.assign(posts, post(fields))
        await tx.insert(posts, [parent])
        const children = await ids.assign(
          comments,
          bodies.map((body) => ({ postId: parent.id, body })),
        )
        await tx.insert(comments, children)
        postId = id(parent)
        commentIds = children.map(id)
      })
      return { postId: postId!, commentIds }
    },
    async addCommentToLoadedPost(postId, body) {
      const [loaded] = await db.select(posts, tables.postId, postId)
      if (!loaded) throw new Error(`post ${String(postId)} not found`)
      await db.select(comments, tables.commentPostId, loaded.id) // its comments, as an app would
      const [comment] = await ids.assign(comments, [{ postId: loaded.id, body }])
      await db.insert(comments, [comment!])
      return id(comment!)
    },
    async createPostThenFail(fields) {
      await db.transaction(async (tx) => {
        await tx.insert(posts, [await ids.assign(posts, post(fields))])
        throw new Error('the transaction failed after the insert, as planned')
      })
    },
    async createKeyed(shardKey, given) {
      const row = await ids.assign(keyed, {
        shardKey,
        ...(given === undefined ? {} : { id: given }),
      })
      await db.insert(keyed, [row])
      return id(row)
    },
    async upsertKeyed(given, shardKey) {
      const row = await ids.assignForUpsert(keyed, { id: given, shardKey })
      await db.upsert(keyed, [row], { shardKey })
    },
    async createTagged(tenant, lshard) {
      const row = await ids.assign(tagged, { tenant, ...(lshard === undefined ? {} : { lshard }) })
      await db.insert(tagged, [row])
      return id(row)
    },
    async createTaggedMany(tenants) {
      const rows = await ids.assign(
        tagged,
        tenants.map((tenant) => ({ tenant })),
      )
      await db.insert(tagged, rows)
      return rows.map(id)
    },
    async updateTaggedShard(given, lshard) {
      const set = { lshard }
      ids.checkUpdate(tagged, given, set)
      await db.update(tagged, set, given)
    },
    async close() {
      ids.close()
      await db.close()
    },
  }
}
