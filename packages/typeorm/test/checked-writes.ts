/**
 * Mistakes users make that the conformance suite does not drive through TypeORM: a hook of the
 * call that throws (the process must live on), IDs given for rows whose rule the caller broke
 * (own key, fixed shard, cascaded children), one new child under two parents, `save()` and
 * `upsert()` moving a stored row's key to another shard, and a key a case-insensitive collation
 * calls equal to another. Registers the tests; `tag` keeps each TypeORM major's databases apart.
 */
import {
  blogSchemaSql,
  type Dialect,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import {
  InProcessSource,
  InvalidArgumentError,
  InvalidIdError,
  MisplacedIdError,
  ShardKeyChangedError,
  UnsafeNumberError,
} from '@shardflake/core'
import { BeforeInsert, Column, DataSource, Entity } from 'typeorm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ShardedId, shardedIds, trustSuppliedIds } from '../src'
import { Author, Comment, dataSourceOptions, Keyed, Post } from './blog'

/** The `keyed` table with a validation a user wrote: `shardKey: 'invalid'` throws. */
@Entity('keyed')
class ValidatedKeyed {
  @ShardedId<ValidatedKeyed>({ shardBy: 'shardKey' })
  id?: string

  @Column({ type: 'varchar', name: 'shard_key', nullable: true })
  shardKey?: string

  @BeforeInsert()
  validate(): void {
    if (this.shardKey === 'invalid') throw new Error('shardKey "invalid" is not allowed')
  }
}

/** The `keyed` table with the key normalized before the ID is made (the collation recipe). */
@Entity('keyed')
class NormalizedKeyed {
  @ShardedId<NormalizedKeyed>({ shardBy: 'shardKey' })
  id?: string

  @Column({ type: 'varchar', name: 'shard_key', nullable: true })
  shardKey?: string

  @BeforeInsert()
  normalize(): void {
    this.shardKey = this.shardKey?.trim().toLowerCase()
  }
}

/** The `keyed` table, every row on shard 3. */
@Entity('keyed')
class PinnedKeyed {
  @ShardedId({ shard: 3 })
  id?: string

  @Column({ type: 'varchar', name: 'shard_key', nullable: true })
  shardKey?: string
}

/** Members of a tenant, found by email: `upsert(..., ['email'])` may change the tenant. */
@Entity('members')
class Member {
  @ShardedId<Member>({ shardBy: 'tenant' })
  id?: string

  @Column({ type: 'varchar', unique: true })
  email!: string

  @Column({ type: 'varchar' })
  tenant!: string
}

const entities = [
  Author,
  Post,
  Comment,
  Keyed,
  ValidatedKeyed,
  NormalizedKeyed,
  PinnedKeyed,
  Member,
]

/**
 * What `run` rejects with (undefined when it resolves), after the event loop has turned a few
 * times; fails the test if any promise was rejected with nobody listening meanwhile (Node ends
 * the process on that).
 */
async function rejectionOf(run: () => Promise<unknown>): Promise<unknown> {
  const unhandled: unknown[] = []
  const listener = (reason: unknown) => unhandled.push(reason)
  process.on('unhandledRejection', listener)
  try {
    const error = await run().then(
      () => undefined,
      (caught: unknown) => caught,
    )
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve))
    expect(unhandled).toEqual([])
    return error
  } finally {
    process.off('unhandledRejection', listener)
  }
}

export function describeCheckedWrites(tag: string): void {
  const sharding = testSharding()
  const n = sharding.logicalShards
  const yesterday = () => Date.now() - 86_400_000
  const idOn = (shard: number, sequence: number) =>
    sharding.layout.compose({ timestamp: yesterday(), shard, sequence }).toString()
  /** The first `prefix-0`, `prefix-1`, ... whose shard is (or is not) `shard`. */
  const keyWhere = (prefix: string, onShard: boolean, shard: number) => {
    for (let i = 0; ; i++) {
      const key = `${prefix}-${i}`
      if ((sharding.shardForKey(key) === shard) === onShard) return key
    }
  }

  for (const dialect of ['postgres', 'mysql'] as const satisfies readonly Dialect[]) {
    describe(`checked writes on ${dialect}`, () => {
      let raw: RawDatabase
      let dataSource: DataSource
      let source: InProcessSource
      /** Two authors on different shards, and one on the first one's shard. */
      let authors: Author[] = []
      const p = (index: number) => (dialect === 'postgres' ? `$${index}` : '?')
      const count = async (sql: string, params: unknown[] = []) =>
        Number(Object.values((await raw.query(sql, params))[0] ?? {})[0])

      beforeAll(async () => {
        raw = await freshDatabase(dialect, `sf_typeorm_${tag}checked_${dialect.slice(0, 2)}`)
        for (const statement of blogSchemaSql(dialect)) await raw.query(statement)
        const text = dialect === 'postgres' ? 'TEXT' : 'VARCHAR(200)'
        await raw.query('DROP TABLE IF EXISTS members')
        await raw.query(
          `CREATE TABLE members (id BIGINT NOT NULL PRIMARY KEY, email VARCHAR(200) NOT NULL UNIQUE, tenant ${text} NOT NULL)`,
        )
        source = new InProcessSource({ sharding, shards: 'all' })
        dataSource = new DataSource(dataSourceOptions(raw, entities))
        shardedIds(dataSource, { source })
        await dataSource.initialize()
        const saved: Author[] = []
        for (let i = 0; saved.length < 3; i++) {
          const email = `author${i}@example.com`
          const shard = sharding.shardForKey(email)
          const firstShard = saved[0] && sharding.shardOfId(saved[0].id)
          const wanted =
            saved.length === 0 || (saved.length === 1 ? shard !== firstShard : shard === firstShard)
          if (!wanted) continue
          saved.push(
            await dataSource.getRepository(Author).save(Object.assign(new Author(), { email })),
          )
        }
        authors = saved
      })

      afterAll(async () => {
        await dataSource?.destroy()
        source?.close()
        await raw?.close()
      })

      describe('a hook of the call throws: the call rejects, the process lives on', () => {
        it('insert() with a bad ID in row 2 (row 1 without its key)', async () => {
          const error = await rejectionOf(() =>
            dataSource.getRepository(Keyed).insert([{}, { id: 'abc', shardKey: '1' }]),
          )
          expect(error).toBeInstanceOf(InvalidIdError)
        })

        it('save() whose @BeforeInsert validation throws in row 2', async () => {
          const error = await rejectionOf(() =>
            dataSource
              .getRepository(ValidatedKeyed)
              .save([
                new ValidatedKeyed(),
                Object.assign(new ValidatedKeyed(), { shardKey: 'invalid' }),
              ]),
          )
          expect(String(error)).toMatch(/"invalid" is not allowed/)
        })

        it('a cascaded save() whose parent ID is a number above 2^53', async () => {
          const post = await dataSource
            .getRepository(Post)
            .save(Object.assign(new Post(), { author: authors[0], title: 'number parent' }))
          const error = await rejectionOf(() =>
            dataSource.getRepository(Comment).save(
              // as users write it: the parent's ID read into a number (it has lost digits)
              Object.assign(
                new Comment(),
                { body: 'to a rounded parent' },
                { post: { id: Number(post.id) } },
              ),
            ),
          )
          expect(error).toBeInstanceOf(UnsafeNumberError)
          expect(
            await count(`SELECT COUNT(*) FROM comments WHERE body = ${p(1)}`, [
              'to a rounded parent',
            ]),
          ).toBe(0)
        })
      })

      describe('IDs the caller gives', () => {
        it('refuses a post with a misplaced ID, and its cascaded comments, before anything is written', async () => {
          const author = authors[0]!
          const wrong = idOn((sharding.shardOfId(author.id) + 1) % n, 31)
          const post = Object.assign(new Post(), {
            id: wrong,
            author,
            title: 'misplaced parent',
            comments: [Object.assign(new Comment(), { body: 'follows a misplaced parent' })],
          })
          const error = await rejectionOf(() => dataSource.getRepository(Post).save(post))
          expect(error).toBeInstanceOf(MisplacedIdError)
          expect(await count(`SELECT COUNT(*) FROM posts WHERE id = ${p(1)}`, [wrong])).toBe(0)
          expect(
            await count(`SELECT COUNT(*) FROM comments WHERE body = ${p(1)}`, [
              'follows a misplaced parent',
            ]),
          ).toBe(0)
        })

        it('inside trustSuppliedIds keeps it, and the cascaded comments follow the ID, not the rule', async () => {
          const author = authors[0]!
          const shard = (sharding.shardOfId(author.id) + 1) % n
          const post = Object.assign(new Post(), {
            id: idOn(shard, 32),
            author,
            title: 'imported parent',
            comments: [Object.assign(new Comment(), { body: 'imported child' })],
          })
          await trustSuppliedIds(() => dataSource.getRepository(Post).save(post))
          const [row] = await raw.query(`SELECT id, post_id FROM comments WHERE body = ${p(1)}`, [
            'imported child',
          ])
          expect(String(row?.post_id)).toBe(post.id)
          expect(sharding.shardOfId(String(row?.id))).toBe(shard)
          await raw.query(`DELETE FROM comments WHERE post_id = ${p(1)}`, [post.id])
          await raw.query(`DELETE FROM posts WHERE id = ${p(1)}`, [post.id])
        })

        it('checks a fixed shard too', async () => {
          const pinned = dataSource.getRepository(PinnedKeyed)
          const error = await rejectionOf(() =>
            pinned.insert({ id: idOn(4, 33), shardKey: 'pinned wrong' }),
          )
          expect(error).toBeInstanceOf(MisplacedIdError)
          await pinned.insert({ id: idOn(3, 33), shardKey: 'pinned right' })
          expect(
            await count(`SELECT COUNT(*) FROM keyed WHERE shard_key LIKE ${p(1)}`, ['pinned %']),
          ).toBe(1)
          await raw.query(`DELETE FROM keyed WHERE shard_key = ${p(1)}`, ['pinned right'])
        })
      })

      describe('one new child listed under two new parents', () => {
        const twoParents = (title: string, second: Author, own?: 'first' | 'second') => {
          const comment = Object.assign(new Comment(), { body: title })
          const first = Object.assign(new Post(), {
            author: authors[0],
            title: `${title} 1`,
            comments: [comment],
          })
          const other = Object.assign(new Post(), {
            author: second,
            title: `${title} 2`,
            comments: [comment],
          })
          if (own) comment.post = own === 'first' ? first : other
          return [first, other]
        }

        it('refuses it when the parents are on different shards (TypeORM writes it under the last), writing nothing', async () => {
          for (const own of [undefined, 'first', 'second'] as const) {
            const title = `two parents ${own ?? 'none'}`
            const error = await rejectionOf(() =>
              dataSource.getRepository(Post).save(twoParents(title, authors[1]!, own)),
            )
            expect(error, title).toBeInstanceOf(InvalidArgumentError)
            expect(
              await count(`SELECT COUNT(*) FROM posts WHERE title LIKE ${p(1)}`, [`${title} %`]),
            ).toBe(0)
          }
        })

        it('writes it on that shard when both parents are on one shard', async () => {
          const saved = await dataSource
            .getRepository(Post)
            .save(twoParents('two parents one shard', authors[2]!))
          const [row] = await raw.query(`SELECT id, post_id FROM comments WHERE body = ${p(1)}`, [
            'two parents one shard',
          ])
          expect(saved.map((post) => post.id)).toContain(String(row?.post_id))
          expect(sharding.shardOfId(String(row?.id))).toBe(sharding.shardOfId(authors[0]!.id))
        })
      })

      describe('a stored row whose key moves to another shard', () => {
        it('refuses save() of a loaded row with a key on another shard, and saves one on the same shard', async () => {
          const repository = dataSource.getRepository(Keyed)
          const row = await repository.save(Object.assign(new Keyed(), { shardKey: 'moving' }))
          const shard = sharding.shardOfId(row.id!)
          const loaded = await repository.findOneByOrFail({ id: row.id! })
          loaded.shardKey = keyWhere('moving', false, shard)
          expect(await rejectionOf(() => repository.save(loaded))).toBeInstanceOf(
            ShardKeyChangedError,
          )
          expect((await repository.findOneByOrFail({ id: row.id! })).shardKey).toBe('moving')
          loaded.shardKey = keyWhere('moving', true, shard)
          await repository.save(loaded)
          expect((await repository.findOneByOrFail({ id: row.id! })).shardKey).toBe(loaded.shardKey)
          loaded.shardKey = keyWhere('moving trusted', false, shard)
          await trustSuppliedIds(() => repository.save(loaded))
          await raw.query(`DELETE FROM keyed WHERE id = ${p(1)}`, [row.id])
        })

        it('refuses moving a comment under a post on another shard, saved or new in the same call', async () => {
          const posts = dataSource.getRepository(Post)
          const home = await posts.save(
            Object.assign(new Post(), {
              author: authors[0],
              title: 'home',
              comments: [Object.assign(new Comment(), { body: 'moving comment' })],
            }),
          )
          const away = await posts.save(
            Object.assign(new Post(), { author: authors[1], title: 'away' }),
          )
          const comments = dataSource.getRepository(Comment)
          const comment = await comments.findOneOrFail({
            where: { body: 'moving comment' },
            relations: { post: true },
          })
          comment.post = away
          expect(await rejectionOf(() => comments.save(comment))).toBeInstanceOf(
            ShardKeyChangedError,
          )
          comment.post = Object.assign(new Post(), { author: authors[1], title: 'new away' })
          expect(await rejectionOf(() => comments.save(comment))).toBeInstanceOf(
            ShardKeyChangedError,
          )
          expect(
            await count(`SELECT COUNT(*) FROM posts WHERE title = ${p(1)}`, ['new away']),
          ).toBe(0)
          const [row] = await raw.query(`SELECT post_id FROM comments WHERE body = ${p(1)}`, [
            'moving comment',
          ])
          expect(String(row?.post_id)).toBe(home.id)
          // A post on the same shard is fine.
          comment.post = Object.assign(new Post(), { author: authors[2], title: 'new neighbour' })
          await comments.save(comment)
          const [moved] = await raw.query(`SELECT post_id FROM comments WHERE body = ${p(1)}`, [
            'moving comment',
          ])
          expect(String(moved?.post_id)).toBe(comment.post.id)
        })

        it('refuses upsert() by another unique column that moves the tenant to another shard', async () => {
          const members = dataSource.getRepository(Member)
          await members.upsert({ email: 'm@example.com', tenant: 'tenant-a' }, ['email'])
          const [stored] = await raw.query(`SELECT id FROM members WHERE email = ${p(1)}`, [
            'm@example.com',
          ])
          const shard = sharding.shardOfId(String(stored?.id))
          expect(shard).toBe(sharding.shardForKey('tenant-a'))
          const elsewhere = keyWhere('tenant', false, shard)
          const error = await rejectionOf(() =>
            members.upsert({ email: 'm@example.com', tenant: elsewhere }, ['email']),
          )
          expect(error).toBeInstanceOf(ShardKeyChangedError)
          const same = keyWhere('tenant', true, shard)
          await members.upsert([{ email: 'm@example.com', tenant: same }], {
            conflictPaths: { email: true },
          })
          const [after] = await raw.query(`SELECT id, tenant FROM members WHERE email = ${p(1)}`, [
            'm@example.com',
          ])
          expect(after).toEqual({ id: stored?.id, tenant: same })
        })
      })

      describe('string keys under a case-insensitive collation', () => {
        it('hashes spellings the database calls equal to different shards; normalizing in @BeforeInsert places them together', async () => {
          const spellings = ['Acme', 'acme', 'acme ']
          expect(new Set(spellings.map((key) => sharding.shardForKey(key))).size).toBe(3)
          if (dialect === 'mysql') {
            const [row] = await raw.query(
              "SELECT ('Acme' = 'acme') AND ('acme' = 'acme ') AS equal",
            )
            expect(Number(row?.equal)).toBe(1)
          }
          const saved = await dataSource
            .getRepository(NormalizedKeyed)
            .save(spellings.map((shardKey) => Object.assign(new NormalizedKeyed(), { shardKey })))
          for (const row of saved) {
            expect(row.shardKey).toBe('acme')
            expect(sharding.shardOfId(row.id!)).toBe(sharding.shardForKey('acme'))
          }
        })
      })
    })
  }
}
