/**
 * The adapter suite run against the smallest possible "adapter": plain SQL, with the shard rules
 * applied through core's `resolveShard` and IDs fetched through `allocateIds`. It proves the suite
 * itself, and shows ORM adapters what `setup` has to provide.
 */
import {
  allocateIds,
  checkKeyChange,
  checkShardColumnChange,
  checkSuppliedId,
  fillShardColumn,
  type IdSource,
  InProcessSource,
  MissingShardKeyError,
  type ShardRule,
  setShardColumn,
} from '@shardflake/core'
import {
  asAsync,
  type BlogThroughOrm,
  type Dialect,
  describeAdapter,
  type RawDatabase,
} from '../src'

interface Row extends Record<string, unknown> {
  id?: string
}

function plainSqlBlog(raw: RawDatabase, source: IdSource): BlogThroughOrm {
  const sharding = source.sharding!
  const placeholders = (count: number, from: number) =>
    Array.from({ length: count }, (_, i) =>
      raw.dialect === 'postgres' ? `$${from + i}` : '?',
    ).join(', ')

  /** The shard `rule` gives `row`, or undefined when its key or parent is not set. */
  function ruleShard<T extends Row>(row: T, rule: ShardRule<T>, entityName: string) {
    try {
      return sharding.resolveShard(rule, row, entityName)
    } catch (error) {
      if (error instanceof MissingShardKeyError) return undefined
      throw error
    }
  }

  /**
   * Checks the caller's ID of every row that has one (`given`, as the caller gave it) against its
   * rule, then gives every row without one an ID from its rule, one source call per shard.
   */
  async function assign<T extends Row>(
    rows: T[],
    rule: ShardRule<T>,
    entityName: string,
    given: readonly unknown[] = [],
  ) {
    rows.forEach((row, i) => {
      const id = given[i] ?? row.id
      if (id === undefined) return
      row.id = checkSuppliedId(
        sharding,
        id,
        ruleShard(row, rule, entityName),
        entityName,
      ).toString()
    })
    const pending = rows.filter((row) => row.id === undefined)
    const shards = pending.map((row) => sharding.resolveShard(rule, row, entityName))
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

  /** Tagged rows: the shard column checked before any ID is spent, then filled from each ID. */
  async function insertTagged(
    tenants: readonly string[],
    lshards: readonly (number | undefined)[] = [],
  ) {
    const rule: ShardRule<Row> = { shardBy: 'tenant', shardColumn: 'lshard' }
    const rows: Row[] = tenants.map((tenant, i) => ({ tenant, lshard: lshards[i] }))
    for (const row of rows) {
      setShardColumn(row, 'lshard', sharding.resolveShard(rule, row), 'Tagged')
    }
    await assign(rows, rule, 'Tagged')
    for (const row of rows) fillShardColumn(sharding, row, 'lshard', row.id, 'Tagged')
    await insert('tagged', ['id', 'tenant', 'lshard'], rows)
    return rows.map((row) => row.id!)
  }

  const postRule: ShardRule<Row> = { sameShardAs: 'author_id' }
  const commentRule: ShardRule<Row> = { sameShardAs: 'post_id' }
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
      await assign(comments, commentRule, 'Comment')
      await insert('posts', ['id', 'author_id', 'title'], [postRow])
      await insert('comments', ['id', 'post_id', 'body'], comments)
      return { postId: postRow.id!, commentIds: comments.map((row) => row.id!) }
    },
    async addCommentToLoadedPost(postId, body) {
      // "Load" the post and its comments, add one, save what is new.
      const [post] = await raw.query(`SELECT id FROM posts WHERE id = ${postId}`)
      const comments: Row[] = await raw.query(`SELECT id FROM comments WHERE post_id = ${postId}`)
      comments.push({ post_id: String(post?.id), body })
      const added = comments.filter((row) => row.id === undefined)
      await assign(added, commentRule, 'Comment')
      await insert('comments', ['id', 'post_id', 'body'], added)
      return added[0]!.id!
    },
    async createKeyed(shardKey, id) {
      const row: Row = { shard_key: shardKey }
      await assign([row], { shardBy: 'shard_key' }, 'Keyed', [id])
      await insert('keyed', ['id', 'shard_key'], [row])
      return row.id!
    },
    async upsertKeyed(id, shardKey) {
      checkKeyChange(sharding, id, sharding.shardForKey(shardKey), 'Keyed')
      await raw.query(
        raw.dialect === 'postgres'
          ? 'INSERT INTO keyed (id, shard_key) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET shard_key = EXCLUDED.shard_key'
          : 'INSERT INTO keyed (id, shard_key) VALUES (?, ?) ON DUPLICATE KEY UPDATE shard_key = VALUES(shard_key)',
        [String(id), shardKey],
      )
    },
    async createTagged(tenant, lshard) {
      return (await insertTagged([tenant], [lshard]))[0]!
    },
    createTaggedMany: (tenants) => insertTagged(tenants),
    async updateTaggedShard(id, lshard) {
      checkShardColumnChange(sharding, id, 'lshard', lshard, 'Tagged')
      await raw.query(
        `UPDATE tagged SET lshard = ${placeholders(1, 1)} WHERE id = ${placeholders(1, 2)}`,
        [lshard, String(id)],
      )
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
    database: `sf_conf_ref_${dialect}`,
    createSource: (_raw, sharding) => new InProcessSource({ sharding, shards: 'all' }),
    setup: async ({ raw, source }) => plainSqlBlog(raw, source),
  })

  describeAdapter(`plain SQL / ${dialect} / async source`, {
    dialect,
    database: `sf_conf_ref_async_${dialect}`,
    createSource: (_raw, sharding) => asAsync(new InProcessSource({ sharding, shards: 'all' })),
    setup: async ({ raw, source }) => plainSqlBlog(raw, source),
  })
}
