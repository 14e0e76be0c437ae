/**
 * The adapter suite run against the smallest possible "adapter": plain SQL, with the shard rules
 * applied through core's `resolveShard` and IDs fetched through `allocateIds`. It proves the suite
 * itself, and shows ORM adapters what `setup` has to provide.
 */
import {
  allocateIds,
  type IdSource,
  InProcessSource,
  instagram,
  logicalShardsOf,
  resolveShard,
  type ShardRule,
} from '@shardflake/core'
import { type BlogThroughOrm, type Dialect, describeAdapter, type RawDatabase } from '../src'

interface Row extends Record<string, unknown> {
  id?: string
}

function plainSqlBlog(raw: RawDatabase, source: IdSource): BlogThroughOrm {
  const layout = source.layout!
  const logicalShards = logicalShardsOf(source)
  const placeholders = (count: number, from: number) =>
    Array.from({ length: count }, (_, i) =>
      raw.dialect === 'postgres' ? `$${from + i}` : '?',
    ).join(', ')

  /** Gives every row without an id one from its rule, one source call per shard. */
  async function assign<T extends Row>(rows: T[], rule: ShardRule<T>, entityName: string) {
    const pending = rows.filter((row) => row.id === undefined)
    const shards = pending.map((row) =>
      resolveShard(rule, row, { layout, logicalShards, entityName }),
    )
    const ids = await allocateIds(source, shards)
    pending.forEach((row, i) => {
      row.id = ids[i]!.toString()
    })
  }

  async function insert(table: string, columns: string[], rows: Row[]) {
    const values = rows
      .map((_, r) => `(${placeholders(columns.length, r * columns.length + 1)})`)
      .join(', ')
    await raw.query(
      `INSERT INTO ${table} (${columns.join(', ')}) VALUES ${values}`,
      rows.flatMap((row) => columns.map((column) => row[column])),
    )
  }

  const postRule: ShardRule<Row> = { shardBy: 'author_id' }
  return {
    idType: 'string',
    async createAuthor(email) {
      const row: Row = { email }
      await assign([row], { shardBy: 'email' }, 'Author')
      await insert('authors', ['id', 'email'], [row])
      return row.id!
    },
    async createPost({ authorId, title, id }) {
      const row: Row = { id: id?.toString(), author_id: authorId?.toString(), title }
      await assign([row], postRule, 'Post')
      await insert('posts', ['id', 'author_id', 'title'], [row])
      return row.id!
    },
    async createPosts(posts) {
      const rows: Row[] = posts.map((post) => ({
        author_id: post.authorId.toString(),
        title: post.title,
      }))
      await assign(rows, postRule, 'Post')
      await insert('posts', ['id', 'author_id', 'title'], rows)
      return rows.map((row) => row.id!)
    },
    async createPostWithComments(post, bodies) {
      const postRow: Row = { author_id: post.authorId.toString(), title: post.title }
      await assign([postRow], postRule, 'Post')
      const comments: Row[] = bodies.map((body) => ({ post_id: postRow.id, body }))
      await assign(comments, { sameShardAs: 'post_id' }, 'Comment')
      await insert('posts', ['id', 'author_id', 'title'], [postRow])
      await insert('comments', ['id', 'post_id', 'body'], comments)
      return { postId: postRow.id!, commentIds: comments.map((row) => row.id!) }
    },
    async createPostThenFail(post) {
      const row: Row = { author_id: post.authorId.toString(), title: post.title }
      await assign([row], postRule, 'Post')
      const begin = raw.dialect === 'postgres' ? 'BEGIN' : 'START TRANSACTION'
      // One statement batch keeps the transaction on one pooled connection.
      await raw.query(
        `${begin}; INSERT INTO posts (id, author_id, title) VALUES (${row.id}, ${row.author_id}, 'rolled back'); ROLLBACK`,
      )
      throw new Error('the transaction failed after the insert, as planned')
    },
    async close() {},
  }
}

for (const dialect of ['postgres', 'mysql'] as const satisfies readonly Dialect[]) {
  describeAdapter(`plain SQL / ${dialect} / in-process`, {
    dialect,
    database: `sf_conformance_reference_${dialect}`,
    createSource: () => new InProcessSource({ layout: instagram, shards: 'all' }),
    setup: async ({ raw, source }) => plainSqlBlog(raw, source),
  })

  describeAdapter(`plain SQL / ${dialect} / async source`, {
    dialect,
    database: `sf_conformance_reference_async_${dialect}`,
    createSource: () => asAsync(new InProcessSource({ layout: instagram, shards: 'all' })),
    setup: async ({ raw, source }) => plainSqlBlog(raw, source),
  })
}

/** The in-process source behind promises, standing in for a database source. */
function asAsync(inner: InProcessSource): IdSource {
  return {
    layout: inner.layout,
    synchronous: false,
    nextId: async (shard) => inner.nextId(shard),
    nextIds: async (shard, count) => inner.nextIds(shard, count),
  }
}
