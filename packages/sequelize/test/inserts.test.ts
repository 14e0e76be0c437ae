/**
 * The insert paths beyond the conformance suite, on both servers: nested creates with new
 * parents and children (one source call per shard for the whole graph), `fields` without the key,
 * IDs the caller gives, `upsert`, `assign()` for paths without hooks, hooks of the application
 * that change a key, and children of models whose key is not sharded.
 */
import {
  asAsync,
  CountingSource,
  type Dialect,
  expectedShard,
  findError,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import {
  InProcessSource,
  InvalidArgumentError,
  InvalidIdError,
  MisplacedIdError,
  MissingShardKeyError,
  ShardKeyChangedError,
  trustSuppliedIds,
  UnsafeNumberError,
} from '@shardflake/core'
import { DataTypes, type Model, type ModelStatic, type Sequelize } from 'sequelize'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { type ShardedIds, shardedId, shardedIds } from '../src'
import { defineBlog, sequelizeOn } from './support/blog'

const sharding = testSharding(64)
const inner = new InProcessSource({ sharding, shards: 'all' })
// Asynchronous, like a database source, so that every call to it counts.
const source = new CountingSource(asAsync(inner))
afterAll(() => inner.close())

for (const dialect of ['postgres', 'mysql'] as const satisfies Dialect[]) {
  describe(`inserts on ${dialect === 'postgres' ? 'PostgreSQL' : 'MariaDB'}`, () => {
    let raw: RawDatabase
    let sequelize: Sequelize
    let ids: ShardedIds
    let blog: ReturnType<typeof defineBlog>
    let extra: ReturnType<typeof defineExtra>
    const shardOf = (id: unknown) => sharding.shardOfId(String(id))
    const rows = (sql: string) => raw.query(sql)
    /** The first of `prefix-0@example.com`, `prefix-1@...` whose shard is not `shard`. */
    const otherKey = (prefix: string, shard: number) => {
      for (let i = 0; ; i++) {
        const key = `${prefix}-${i}@example.com`
        if (expectedShard(key, 64) !== shard) return key
      }
    }
    /** The first of `prefix-0@example.com`, `prefix-1@...` on `shard`. */
    const sameKey = (prefix: string, shard: number) => {
      for (let i = 0; ; i++) {
        const key = `${prefix}-${i}@example.com`
        if (expectedShard(key, 64) === shard) return key
      }
    }

    beforeAll(async () => {
      raw = await freshDatabase(dialect, `sf_sqlz_inserts_${dialect.slice(0, 2)}`)
      sequelize = sequelizeOn(raw)
      ids = shardedIds(sequelize, { source })
      blog = defineBlog(sequelize)
      extra = defineExtra(sequelize)
      await sequelize.sync()
    })

    afterAll(async () => {
      await sequelize?.close()
      await raw?.close()
    })

    beforeEach(() => source.reset())

    it('creates a post with a new author (belongsTo, inserted first): the author on its email’s shard, the post on the author’s, one source call', async () => {
      const post = await blog.Post.create(
        { title: 'with a new author', author: { email: 'new-author@example.com' } },
        { include: [{ association: 'author' }] },
      )
      const [stored] = await rows(
        `SELECT p.id, p.author_id, a.email FROM posts p JOIN authors a ON a.id = p.author_id WHERE p.title = 'with a new author'`,
      )
      expect(String(stored?.id)).toBe(post.get('id'))
      expect(shardOf(stored?.author_id)).toBe(expectedShard('new-author@example.com', 64))
      expect(shardOf(stored?.id)).toBe(shardOf(stored?.author_id))
      expect(source.nextIdsCalls + source.nextIdCalls).toBe(1)
    })

    it('bulk-creates authors → posts → comments in one call: every row with its parent, one source call per shard', async () => {
      const emails = ['graph-a@example.com', 'graph-b@example.com', 'graph-c@example.com']
      await blog.Post.bulkCreate(
        emails.map((email, i) => ({
          title: `graph ${i}`,
          author: { email },
          comments: [{ body: `graph ${i} first` }, { body: `graph ${i} second` }],
        })),
        {
          include: [{ association: 'author' }, { association: 'comments' }],
        },
      )
      const stored = await rows(
        `SELECT c.id AS comment, p.id AS post, a.id AS author, a.email FROM comments c JOIN posts p ON p.id = c.post_id JOIN authors a ON a.id = p.author_id WHERE p.title LIKE 'graph %'`,
      )
      expect(stored).toHaveLength(6)
      for (const row of stored) {
        expect(shardOf(row.author)).toBe(expectedShard(String(row.email), 64))
        expect(shardOf(row.post)).toBe(shardOf(row.author))
        expect(shardOf(row.comment)).toBe(shardOf(row.post))
      }
      const shards = new Set(emails.map((email) => expectedShard(email, 64))).size
      expect(source.nextIdCalls).toBe(0)
      expect(source.nextIdsCalls).toBe(shards)
      expect(source.idsIssued).toBe(12)
    })

    it('creates a comment with a new post of an existing author (belongsTo include), on the author’s shard', async () => {
      const author = await blog.Author.create({ email: 'comment-first@example.com' })
      const comment = await blog.Comment.create(
        { body: 'child first', post: { title: 'parent second', authorId: author.get('id') } },
        { include: [{ association: 'post' }] },
      )
      const [stored] = await rows(
        `SELECT c.id, c.post_id, p.author_id FROM comments c JOIN posts p ON p.id = c.post_id WHERE c.body = 'child first'`,
      )
      expect(String(stored?.id)).toBe(comment.get('id'))
      expect(String(stored?.author_id)).toBe(author.get('id'))
      expect(shardOf(stored?.id)).toBe(shardOf(author.get('id')))
      expect(shardOf(stored?.post_id)).toBe(shardOf(author.get('id')))
    })

    it('gives build().save() and findOrCreate() their IDs; an INSERT without hooks gets none and fails on the key', async () => {
      const built = blog.Author.build({ email: 'built@example.com' })
      await built.save()
      const [found, created] = await blog.Author.findOrCreate({
        where: { email: 'found@example.com' },
      })
      expect(created).toBe(true)
      const stored = await rows(
        `SELECT id, email FROM authors WHERE email IN ('built@example.com', 'found@example.com')`,
      )
      expect(stored).toHaveLength(2)
      for (const row of stored) {
        expect(shardOf(row.id)).toBe(expectedShard(String(row.email), 64))
        const instance = row.email === 'built@example.com' ? built : found
        expect(instance.get('id')).toBe(String(row.id))
      }
      await expect(
        blog.Author.create({ email: 'no-hooks@example.com' }, { hooks: false }),
      ).rejects.toThrow()
      expect(
        await rows(`SELECT id FROM authors WHERE email = 'no-hooks@example.com'`),
      ).toHaveLength(0)
    })

    it('inserts the key when create() is given fields without it', async () => {
      const author = await blog.Author.create({ email: 'fields@example.com' })
      const post = await blog.Post.create(
        { title: 'only some fields', authorId: author.get('id') },
        { fields: ['title', 'authorId'] },
      )
      const [stored] = await rows(`SELECT id FROM posts WHERE title = 'only some fields'`)
      expect(String(stored?.id)).toBe(post.get('id'))
      expect(shardOf(stored?.id)).toBe(shardOf(author.get('id')))
    })

    it('keeps an ID the caller gives, as a decimal string; refuses an unsafe number or a non-integer before writing', async () => {
      const author = await blog.Author.create({ email: 'caller@example.com' })
      const chosen = sharding.layout.compose({
        timestamp: Date.now() - 86_400_000,
        shard: shardOf(author.get('id')),
        sequence: 3,
      })
      const post = await blog.Post.create({
        id: chosen,
        title: 'bigint id',
        authorId: author.get('id'),
      })
      expect(post.get('id')).toBe(chosen.toString())
      expect(await rows(`SELECT id FROM posts WHERE id = ${chosen}`)).toHaveLength(1)
      const before = await rows('SELECT id FROM posts')
      const unsafe = await blog.Post.create({
        id: Number(chosen) + 1,
        title: 'unsafe',
        authorId: author.get('id'),
      }).catch((error: unknown) => error)
      expect(findError(unsafe, UnsafeNumberError)).toBeInstanceOf(UnsafeNumberError)
      const garbage = await blog.Post.create({
        id: 'abc',
        title: 'garbage',
        authorId: author.get('id'),
      }).catch((error: unknown) => error)
      expect(findError(garbage, InvalidIdError)).toBeInstanceOf(InvalidIdError)
      expect(await rows('SELECT id FROM posts')).toHaveLength(before.length)
    })

    it('refuses a create whose new parent has no key of its own, before anything is written', async () => {
      const error = await blog.Post.create(
        { title: 'orphan', author: {} },
        { include: [{ association: 'author' }] },
      ).catch((caught: unknown) => caught)
      expect(findError(error, MissingShardKeyError)).toBeInstanceOf(MissingShardKeyError)
      expect(await rows(`SELECT id FROM posts WHERE title = 'orphan'`)).toHaveLength(0)
      expect(source.idsIssued).toBe(0)
    })

    it('refuses upsert() without a key, before writing; with assign() and fields without the key, the stored key survives the update', async () => {
      const refused = await blog.Author.upsert({ email: 'upsert@example.com' }).catch(
        (error: unknown) => error,
      )
      expect(refused).toBeInstanceOf(InvalidArgumentError)
      expect(String((refused as Error).message)).toMatch(/assign/)
      expect(await rows(`SELECT id FROM authors WHERE email = 'upsert@example.com'`)).toHaveLength(
        0,
      )

      const first = await ids.assign(extra.Member, [{ email: 'member@example.com', name: 'Ada' }])
      await extra.Member.upsert(first[0]!, { fields: ['email', 'name'] })
      const again = await ids.assign(extra.Member, [
        { email: 'member@example.com', name: 'Ada L.' },
      ])
      expect(again[0]!.id).not.toBe(first[0]!.id)
      await extra.Member.upsert(again[0]!, { fields: ['email', 'name'] })
      const stored = await rows(`SELECT id, name FROM members WHERE email = 'member@example.com'`)
      expect(stored).toHaveLength(1)
      expect(String(stored[0]?.id)).toBe(first[0]!.id)
      expect(stored[0]?.name).toBe('Ada L.')
      expect(shardOf(stored[0]?.id)).toBe(expectedShard('member@example.com', 64))
    })

    it("checks an upsert whose update leaves the key alone against its insert only: a stored row's other fields are updated, a new row's ID must be on its key's shard", async () => {
      const [member] = await ids.assign(extra.Member, [{ email: 'keep@example.com', name: 'one' }])
      await extra.Member.upsert(member!)
      const elsewhere = otherKey('keep-elsewhere', shardOf(member!.id))
      // The UPDATE writes only the name: the stored email, and so the row's shard, stay.
      await extra.Member.upsert(
        { id: member!.id, email: elsewhere, name: 'two' },
        { fields: ['name'] },
      )
      const stored = await rows(`SELECT email, name FROM members WHERE id = ${String(member!.id)}`)
      expect(stored).toEqual([{ email: 'keep@example.com', name: 'two' }])
      // No stored row: the INSERT would put a new row's key on another shard than its ID.
      const fresh = sharding.layout.compose({
        timestamp: Date.now() - 86_400_000,
        shard: shardOf(member!.id),
        sequence: 31,
      })
      const refused = await extra.Member.upsert(
        { id: fresh.toString(), email: elsewhere, name: 'three' },
        { fields: ['name'] },
      ).catch((error: unknown) => error)
      expect(findError(refused, MisplacedIdError)).toBeInstanceOf(MisplacedIdError)
      expect(await rows(`SELECT id FROM members WHERE id = ${fresh}`)).toHaveLength(0)
      // Imports keep it.
      await trustSuppliedIds(() =>
        extra.Member.upsert(
          { id: fresh.toString(), email: elsewhere, name: 'three' },
          { fields: ['name'] },
        ),
      )
      expect(await rows(`SELECT email FROM members WHERE id = ${fresh}`)).toEqual([
        { email: elsewhere },
      ])
      await rows(`DELETE FROM members WHERE id = ${fresh}`)
    })

    it("refuses a save() that moves a stored row's key or parent to another shard with ShardKeyChangedError; same shard, other fields and trustSuppliedIds pass", async () => {
      const author = await blog.Author.create({ email: 'saved@example.com' })
      const authorShard = shardOf(author.get('id'))
      const moved = otherKey('saved-elsewhere', authorShard)
      author.set('email', moved)
      const refused = await author.save().catch((error: unknown) => error)
      expect(findError(refused, ShardKeyChangedError)).toBeInstanceOf(ShardKeyChangedError)
      expect(
        await rows(`SELECT email FROM authors WHERE id = ${String(author.get('id'))}`),
      ).toEqual([{ email: 'saved@example.com' }])
      const refusedUpdate = await author.update({ email: moved }).catch((error: unknown) => error)
      expect(findError(refusedUpdate, ShardKeyChangedError)).toBeInstanceOf(ShardKeyChangedError)
      const refusedBulk = await blog.Author.update(
        { email: moved },
        { where: { id: author.get('id') as string }, individualHooks: true },
      ).catch((error: unknown) => error)
      expect(findError(refusedBulk, ShardKeyChangedError)).toBeInstanceOf(ShardKeyChangedError)
      // A parent on another shard, through the association's setter.
      const post = await blog.Post.create({ title: 'stays', authorId: author.get('id') })
      const other = await blog.Author.create({ email: moved })
      expect(shardOf(other.get('id'))).not.toBe(authorShard)
      const setAuthor: unknown = Reflect.get(post, 'setAuthor')
      if (typeof setAuthor !== 'function') throw new Error('Post has no setAuthor()')
      const refusedParent = await Promise.resolve(setAuthor.call(post, other)).catch(
        (error: unknown) => error,
      )
      expect(findError(refusedParent, ShardKeyChangedError)).toBeInstanceOf(ShardKeyChangedError)
      expect(
        await rows(`SELECT author_id FROM posts WHERE id = ${String(post.get('id'))}`),
      ).toEqual([{ author_id: String(author.get('id')) }])
      // Other fields, and keys on the same shard, are saved.
      await post.reload()
      await post.update({ title: 'renamed' })
      const same = await blog.Author.create({ email: sameKey('saved-same', authorShard) })
      await post.update({ authorId: same.get('id') })
      expect(await rows(`SELECT title FROM posts WHERE id = ${String(post.get('id'))}`)).toEqual([
        { title: 'renamed' },
      ])
      // Imports may.
      await author.reload()
      await trustSuppliedIds(() => author.update({ email: 'saved-moved@example.com' }))
      expect(
        await rows(`SELECT email FROM authors WHERE id = ${String(author.get('id'))}`),
      ).toEqual([{ email: 'saved-moved@example.com' }])
    })

    it('keeps the stored key on a bulkCreate that updates on duplicate; PostgreSQL hands it back, MariaDB leaves the new one on the instance', async () => {
      const [first] = await extra.Member.bulkCreate([{ email: 'dup@example.com', name: 'one' }])
      const [again] = await extra.Member.bulkCreate([{ email: 'dup@example.com', name: 'two' }], {
        updateOnDuplicate: ['name'],
      })
      const stored = await rows(`SELECT id, name FROM members WHERE email = 'dup@example.com'`)
      expect(stored).toHaveLength(1)
      expect(String(stored[0]?.id)).toBe(first?.get('id'))
      expect(stored[0]?.name).toBe('two')
      if (dialect === 'postgres') expect(again?.get('id')).toBe(first?.get('id'))
      else expect(again?.get('id')).not.toBe(first?.get('id'))
    })

    it('assign() gives plain records their keys for paths without hooks (queryInterface.bulkInsert, hooks: false)', async () => {
      const author = await blog.Author.create({ email: 'raw-rows@example.com' })
      const records = await ids.assign(blog.Post, [
        { title: 'raw 1', authorId: author.get('id') },
        { title: 'raw 2', authorId: author.get('id') },
      ])
      await sequelize.getQueryInterface().bulkInsert(
        'posts',
        records.map((record) => ({
          id: record.id,
          title: record.title,
          author_id: record.authorId,
        })),
      )
      const hookless = (
        await ids.assign(blog.Post, [{ title: 'no hooks', authorId: author.get('id') }])
      )[0]!
      await blog.Post.create(hookless, { hooks: false })
      const stored = await rows(
        `SELECT id FROM posts WHERE title IN ('raw 1', 'raw 2', 'no hooks')`,
      )
      expect(stored.map((row) => String(row.id)).sort()).toEqual(
        [...records.map((record) => String(record.id)), String(hookless.id)].sort(),
      )
      for (const row of stored) expect(shardOf(row.id)).toBe(shardOf(author.get('id')))
    })

    it("places a row by its key as the application's own hooks leave it (model hooks run first)", async () => {
      expect(expectedShard('MiXeD Case', 64)).not.toBe(expectedShard('mixed-case', 64))
      const tag = await extra.Tag.create({ label: 'MiXeD Case' })
      expect(tag.get('label')).toBe('mixed-case')
      expect(shardOf(tag.get('id'))).toBe(expectedShard('mixed-case', 64))
    })

    it('gives a nested child a new ID when its own hook moves it and nothing depends on it; refuses with ShardKeyChangedError when a row already took its shard', async () => {
      expect(expectedShard('Moved Later', 64)).not.toBe(expectedShard('moved-later', 64))
      expect(expectedShard('Renamed Parent', 64)).not.toBe(expectedShard('renamed-parent', 64))
      const tagged = await extra.Note.create(
        { body: 'parent', labels: [{ label: 'Moved Later' }] },
        { include: [{ association: 'labels' }] },
      )
      const [label] = tagged.get('labels') as Model[]
      expect(shardOf(label?.get('id'))).toBe(expectedShard('moved-later', 64))
      const [stored] = await rows(`SELECT id FROM tags WHERE label = 'moved-later'`)
      expect(String(stored?.id)).toBe(label?.get('id'))

      const error = await extra.Entry.create(
        { text: 'child', tag: { label: 'Renamed Parent' } },
        { include: [{ association: 'tag' }] },
      ).catch((caught: unknown) => caught)
      expect(error).toBeInstanceOf(ShardKeyChangedError)
      expect(await rows(`SELECT id FROM tags WHERE label = 'renamed-parent'`)).toHaveLength(0)
      expect(await rows(`SELECT id FROM entries WHERE text = 'child'`)).toHaveLength(0)
    })

    it('places the sharded children of a model whose key is not sharded once its key is known', async () => {
      const tenant = await extra.Tenant.create(
        { name: 'acme', invoices: [{ total: 1 }, { total: 2 }] },
        { include: [{ association: 'invoices' }] },
      )
      const stored = await rows(`SELECT id, tenant_id FROM invoices`)
      expect(stored).toHaveLength(2)
      for (const row of stored) {
        expect(String(row.tenant_id)).toBe(String(tenant.get('id')))
        expect(shardOf(row.id)).toBe(expectedShard(String(tenant.get('id')), 64))
      }
    })
  })
}

/**
 * Models beside the blog: a member with a unique email (upserts), tags whose label a model hook
 * turns into a slug (notes list new tags; entries belong to a new tag), and auto-increment tenants
 * with sharded invoices keyed by tenant.
 */
function defineExtra(sequelize: Sequelize) {
  const common = { timestamps: false, underscored: true }
  const Member = sequelize.define(
    'Member',
    {
      id: shardedId({ shardBy: 'email' }),
      email: { type: DataTypes.STRING, unique: true },
      name: DataTypes.STRING,
    },
    { ...common, tableName: 'members' },
  )
  const normalize = (tag: Model) => {
    tag.set('label', slug(String(tag.get('label'))))
  }
  const Tag = sequelize.define(
    'Tag',
    { id: shardedId({ shardBy: 'label' }), label: DataTypes.STRING },
    {
      ...common,
      tableName: 'tags',
      hooks: {
        beforeCreate: normalize,
        beforeBulkCreate: (tags: Model[]) => tags.forEach(normalize),
      },
    },
  )
  const Note = sequelize.define(
    'Note',
    { id: shardedId({ shard: 5 }), body: DataTypes.STRING },
    { ...common, tableName: 'notes' },
  )
  Note.hasMany(Tag, { as: 'labels', foreignKey: 'noteId' })
  const Entry = sequelize.define(
    'Entry',
    { id: shardedId({ sameShardAs: 'tag' }), text: DataTypes.STRING },
    { ...common, tableName: 'entries' },
  )
  Entry.belongsTo(Tag, { as: 'tag', foreignKey: 'tagId' })
  const Tenant = sequelize.define(
    'Tenant',
    {
      id: { type: DataTypes.BIGINT, primaryKey: true, autoIncrement: true },
      name: DataTypes.STRING,
    },
    { ...common, tableName: 'tenants' },
  )
  const Invoice = sequelize.define(
    'Invoice',
    { id: shardedId({ shardBy: 'tenantId' }), total: DataTypes.INTEGER },
    { ...common, tableName: 'invoices' },
  )
  Tenant.hasMany(Invoice, { as: 'invoices', foreignKey: 'tenantId' })
  return { Member, Tag, Note, Entry, Tenant, Invoice } satisfies Record<string, ModelStatic<Model>>
}

/** What the tags' model hook makes of a label: trimmed, lowercase, words joined by '-'. */
function slug(label: string): string {
  return label.trim().toLowerCase().replace(/\s+/g, '-')
}
