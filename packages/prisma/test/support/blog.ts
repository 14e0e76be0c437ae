import type { BlogThroughOrm, Dialect, OrmId } from '@shardflake/conformance'
import type { IdSource } from '@shardflake/core'
import { type MysqlBlogClient, mysqlClient, type PgBlogClient, pgClient } from './clients'

const key = (id: OrmId) => BigInt(id)

/**
 * The conformance suite's blog written through Prisma: `createMany` through
 * `createManyAndReturn` on PostgreSQL, through `$shardedIds.assign` + `createMany` on MariaDB
 * (no `createManyAndReturn` there).
 */
export function blogOnPrisma(dialect: Dialect, url: string, source: IdSource): BlogThroughOrm {
  return dialect === 'postgres'
    ? blogOn(pgClient(url, source), async (prisma, data) =>
        (await prisma.post.createManyAndReturn({ data, select: { id: true } })).map((r) => r.id),
      )
    : blogOn(mysqlClient(url, source), async (prisma, data) => {
        const rows = await prisma.$shardedIds.assign('Post', data)
        await prisma.post.createMany({ data: rows })
        return rows.map((row) => row.id)
      })
}

function blogOn<P extends PgBlogClient | MysqlBlogClient>(
  prisma: P,
  createMany: (prisma: P, data: { authorId: bigint; title: string }[]) => Promise<bigint[]>,
): BlogThroughOrm {
  // Both clients have the same blog models; the PostgreSQL type describes the calls made here.
  const client = prisma as PgBlogClient
  return {
    idType: 'bigint',
    async createAuthor(email) {
      return (await client.author.create({ data: { email } })).id
    },
    async createPost({ authorId, title, id }) {
      if (authorId === undefined) {
        return (await client.post.create({ data: { title, author: {} } })).id
      }
      const data = { authorId: key(authorId), title, ...(id !== undefined && { id: key(id) }) }
      return (await client.post.create({ data })).id
    },
    createPosts(posts) {
      return createMany(
        prisma,
        posts.map((post) => ({ authorId: key(post.authorId), title: post.title })),
      )
    },
    async createPostWithComments(post, bodies) {
      const created = await client.post.create({
        data: {
          authorId: key(post.authorId),
          title: post.title,
          comments: { create: bodies.map((body) => ({ body })) },
        },
        include: { comments: true },
      })
      return { postId: created.id, commentIds: created.comments.map((comment) => comment.id) }
    },
    async addCommentToLoadedPost(postId, body) {
      const post = await client.post.findUniqueOrThrow({
        where: { id: key(postId) },
        include: { comments: true },
      })
      const saved = await client.post.update({
        where: { id: post.id },
        data: { comments: { create: { body } } },
        include: { comments: { where: { body } } },
      })
      return saved.comments[0]!.id
    },
    async createKeyed(shardKey, id) {
      // A number goes to Prisma as it is: the extension must see what the caller wrote.
      const given = typeof id === 'string' ? key(id) : id
      return (
        await client.keyed.create({ data: { shardKey, ...(given !== undefined && { id: given }) } })
      ).id
    },
    async upsertKeyed(id, shardKey) {
      await client.keyed.upsert({
        where: { id: key(id) },
        create: { id: key(id), shardKey },
        update: { shardKey },
      })
    },
    async createTagged(tenant, lshard) {
      // lshard is required in the Prisma type: the extension fills it, the cast leaves it out.
      const data = { tenant, ...(lshard !== undefined && { lshard }) } as {
        tenant: string
        lshard: number
      }
      return (await client.tagged.create({ data })).id
    },
    async createTaggedMany(tenants) {
      const data = tenants.map((tenant) => ({ tenant })) as { tenant: string; lshard: number }[]
      await client.tagged.createMany({ data })
      const rows = await client.tagged.findMany({ where: { tenant: { in: [...tenants] } } })
      return tenants.map((tenant) => rows.find((row) => row.tenant === tenant)!.id)
    },
    async updateTaggedShard(id, lshard) {
      await client.tagged.update({ where: { id: key(id) }, data: { lshard } })
    },
    async createPostThenFail(post) {
      await client.$transaction(async (tx) => {
        await tx.post.create({ data: { authorId: key(post.authorId), title: post.title } })
        throw new Error('rolled back on purpose')
      })
    },
    close: () => client.$disconnect(),
  }
}
