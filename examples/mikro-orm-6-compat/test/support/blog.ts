import type {
  Collection,
  EntityManager,
  EntityName,
  MikroORM,
  Options,
  RequiredEntityData,
} from '@mikro-orm/core'
import { MikroORM as MariaDbOrm } from '@mikro-orm/mariadb'
import { MikroORM as PostgresOrm } from '@mikro-orm/postgresql'
import type { AdapterSetupContext, BlogThroughOrm, Dialect } from '@shardflake/conformance'
import { type ShardedIdsOptions, shardedIds } from '@shardflake/mikro-orm'

export interface BlogAuthor {
  id: bigint
  email: string
}
export interface BlogPost {
  id: bigint
  author: BlogAuthor
  title: string
  comments: Collection<BlogComment>
}
export interface BlogComment {
  id: bigint
  post: BlogPost
  body: string
}
export interface BlogKeyed {
  id: bigint
  shardKey?: string | null | undefined
}
export interface BlogTagged {
  id: bigint
  tenant: string
  lshard?: number | null
}

/** The blog's entities in one of the three forms (legacy, es, defineEntity). */
export interface BlogEntities {
  Author: EntityName<BlogAuthor>
  Post: EntityName<BlogPost>
  Comment: EntityName<BlogComment>
  /** (Any entity: MikroORM 6's defineEntity infers `shardKey` in a shape BlogKeyed cannot name.) */
  Keyed: unknown
  /** (Any entity, like Keyed.) */
  Tagged: unknown
}

/** MikroORM on `url` with the entities and `extensions`; never creates the schema (the tests do). */
export function openOrm(
  dialect: Dialect,
  url: string,
  entities: readonly unknown[],
  extensions: Options['extensions'],
  more: Partial<Options> = {},
): Promise<MikroORM> {
  const options: Options = {
    clientUrl: url,
    entities: [...entities] as Options['entities'],
    extensions,
    pool: { max: 8 },
    ...more,
  }
  if (dialect === 'postgres') return PostgresOrm.init(options)
  return MariaDbOrm.init(options)
}

/** The conformance blog written through MikroORM: one forked EntityManager per operation. */
export async function mikroBlog(
  dialect: Dialect,
  entities: BlogEntities,
  { source, raw }: AdapterSetupContext,
  options: Omit<ShardedIdsOptions, 'source'> = {},
): Promise<BlogThroughOrm> {
  const { Author, Post, Comment } = entities
  const Keyed = entities.Keyed as EntityName<BlogKeyed>
  const Tagged = entities.Tagged as EntityName<BlogTagged>
  const orm = await openOrm(
    dialect,
    raw.url,
    [Author, Post, Comment, Keyed, ...(source.sharding ? [Tagged] : [])],
    [shardedIds({ source, ...options })],
  )
  const fork = (): EntityManager => orm.em.fork()
  const author = (em: EntityManager, id: bigint | string | undefined) =>
    id === undefined ? undefined : em.getReference(Author, BigInt(id))
  const post = (
    em: EntityManager,
    data: { authorId: bigint | string | undefined; title: string; id?: bigint | string },
  ) =>
    em.create(Post, {
      ...(data.id === undefined ? {} : { id: BigInt(data.id) }),
      author: author(em, data.authorId),
      title: data.title,
    } as BlogPost)

  return {
    idType: 'bigint',
    async createAuthor(email) {
      const em = fork()
      const created = em.create(Author, { email })
      await em.flush()
      return created.id
    },
    async createPost(data) {
      const em = fork()
      const created = post(em, data)
      await em.flush()
      return created.id
    },
    async createPosts(posts) {
      const em = fork()
      const created = posts.map((data) => post(em, data))
      await em.flush()
      return created.map((entity) => entity.id)
    },
    async createPostWithComments(data, bodies) {
      const em = fork()
      const created = em.create(Post, {
        author: author(em, data.authorId),
        title: data.title,
        comments: bodies.map((body) => ({ body })),
      } as RequiredEntityData<BlogPost>)
      await em.flush()
      return { postId: created.id, commentIds: created.comments.getItems().map((c) => c.id) }
    },
    async addCommentToLoadedPost(postId, body) {
      const em = fork()
      const loaded = await em.findOneOrFail(Post, BigInt(postId), { populate: ['comments'] })
      const comment = em.create(Comment, { body } as BlogComment)
      loaded.comments.add(comment)
      await em.flush()
      return comment.id
    },
    async createKeyed(shardKey, id) {
      const em = fork()
      // The caller's ID goes to MikroORM as it comes (a number too): the extension must see it.
      const data = {
        ...(shardKey === undefined ? {} : { shardKey }),
        ...(id === undefined ? {} : { id }),
      }
      const created = em.create(Keyed, data as BlogKeyed)
      await em.flush()
      return created.id
    },
    async upsertKeyed(id, shardKey) {
      // MikroORM 6 would overwrite the stored key on conflict without onConflictExcludeFields.
      await fork().upsert(Keyed, { id: BigInt(id), shardKey } as BlogKeyed, {
        onConflictExcludeFields: ['id'],
      })
    },
    async createPostThenFail(data) {
      await fork().transactional(async (em) => {
        post(em, data)
        await em.flush()
        throw new Error('rolled back on purpose')
      })
    },
    async createTagged(tenant, lshard) {
      const em = fork()
      const created = em.create(Tagged, { tenant, lshard } as BlogTagged) as BlogTagged
      await em.flush()
      return created.id
    },
    async createTaggedMany(tenants) {
      const em = fork()
      const created = tenants.map((tenant) => em.create(Tagged, { tenant } as BlogTagged))
      await em.flush()
      return created.map((entity) => (entity as BlogTagged).id)
    },
    async updateTaggedShard(id, lshard) {
      const em = fork()
      const loaded = (await em.findOneOrFail(Tagged, BigInt(id))) as BlogTagged
      loaded.lshard = lshard
      await em.flush()
    },
    close: () => orm.close(true),
  }
}
