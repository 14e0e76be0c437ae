/**
 * The insert paths the conformance suite does not drive (it writes through save()), on both
 * databases: insert() with instances and plain objects, query-builder inserts, upsert, the SQL a
 * save() sends, the query runner handed to database sources, and the paths no hook sees.
 */
import {
  asAsync,
  blogSchemaSql,
  CountingSource,
  type Dialect,
  expectedShard,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import { type IdRequestContext, type IdSource, InProcessSource } from '@shardflake/core'
import { DataSource, type DataSourceOptions, type Logger } from 'typeorm'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { shardedIds } from '../src'
import {
  Author,
  Comment,
  CommentByColumn,
  dataSourceOptions,
  Keyed,
  Post,
  PostByColumn,
  PostWithAuthorKey,
} from './blog'

const sharding = testSharding()
const entities = [Author, Post, Comment, PostByColumn, CommentByColumn, PostWithAuthorKey, Keyed]

/** An initialized DataSource with every blog entity and shardflake installed. */
async function blogDataSource(
  raw: RawDatabase,
  source: IdSource,
  extra: Partial<DataSourceOptions> = {},
): Promise<DataSource> {
  const dataSource = new DataSource({
    ...dataSourceOptions(raw, entities),
    ...extra,
  } as DataSourceOptions)
  shardedIds(dataSource, { source })
  return dataSource.initialize()
}

const author = (id: string) => Object.assign(new Author(), { id })

/** Registers the tests; `tag` keeps the databases of each TypeORM major apart. */
export function describeInsertPaths(tag: string): void {
  for (const dialect of ['postgres', 'mysql'] as const satisfies readonly Dialect[]) {
    describe(`insert paths on ${dialect}`, () => {
      let raw: RawDatabase
      let dataSource: DataSource
      let counting: CountingSource
      const queries: string[] = []
      const authorIds: string[] = []
      const p = (index: number) => (dialect === 'postgres' ? `$${index}` : '?')

      beforeAll(async () => {
        raw = await freshDatabase(
          dialect,
          `sf_typeorm_${tag}paths_${dialect === 'postgres' ? 'pg' : 'my'}`,
        )
        for (const statement of blogSchemaSql(dialect)) await raw.query(statement)
        counting = new CountingSource(asAsync(new InProcessSource({ sharding, shards: 'all' })))
        dataSource = await blogDataSource(raw, counting, { logger: recorder(queries) })
        for (const email of ['a@example.com', 'b@example.com', 'c@example.com']) {
          authorIds.push(
            (await dataSource.getRepository(Author).save(Object.assign(new Author(), { email })))
              .id,
          )
        }
      })

      afterAll(async () => {
        await dataSource?.destroy()
        await counting?.close()
        await raw?.close()
      })

      beforeEach(() => {
        counting.reset()
        queries.length = 0
      })

      const storedPost = async (title: string) =>
        (await raw.query(`SELECT id, author_id FROM posts WHERE title = ${p(1)}`, [title]))[0]

      it('save() of a new entity sends one INSERT carrying the ID, no SELECT first', async () => {
        const post = await dataSource
          .getRepository(Post)
          .save(Object.assign(new Post(), { author: author(authorIds[0]!), title: 'logged' }))
        const statements = queries.filter((sql) => !/^(START|BEGIN|COMMIT|SET)/i.test(sql.trim()))
        expect(statements).toHaveLength(1)
        expect(statements[0]).toMatch(/^INSERT INTO/)
        expect(String((await storedPost('logged'))?.id)).toBe(post.id)
      })

      it('insert() assigns IDs to instances and to plain objects, one nextIds per shard', async () => {
        const instance = Object.assign(new PostByColumn(), {
          authorId: authorIds[0]!,
          title: 'insert 1',
        })
        const plain: Partial<PostByColumn>[] = [
          { authorId: authorIds[1]!, title: 'insert 2' },
          { authorId: authorIds[1]!, title: 'insert 3' },
        ]
        const result = await dataSource.getRepository(PostByColumn).insert([instance, ...plain])
        expect(typeof instance.id).toBe('string')
        expect(typeof plain[0]!.id).toBe('string')
        expect(result.identifiers.map((row) => row.id)).toEqual([
          instance.id,
          plain[0]!.id,
          plain[1]!.id,
        ])
        for (const [row, title] of [
          [instance, 'insert 1'],
          [plain[0]!, 'insert 2'],
          [plain[1]!, 'insert 3'],
        ] as const) {
          const stored = await storedPost(title)
          expect(String(stored?.id)).toBe(row.id)
          expect(sharding.shardOfId(row.id!)).toBe(sharding.shardOfId(row.authorId!))
        }
        expect(counting.nextIdsCalls).toBe(
          new Set(authorIds.slice(0, 2).map((id) => sharding.shardOfId(id))).size,
        )
      })

      it('assigns IDs in query-builder inserts', async () => {
        const values = [0, 1, 2].map((i) => ({ authorId: authorIds[i]!, title: `qb ${i}` }))
        await dataSource.createQueryBuilder().insert().into(PostByColumn).values(values).execute()
        for (const [i, value] of values.entries()) {
          const id = (value as Partial<PostByColumn>).id!
          expect(String((await storedPost(`qb ${i}`))?.id)).toBe(id)
          expect(sharding.shardOfId(id)).toBe(sharding.shardOfId(authorIds[i]!))
        }
      })

      it('upsert() gives new rows an ID and keeps the stored ID of a conflicting row (the caveat)', async () => {
        const authors = dataSource.getRepository(Author)
        const fresh: Partial<Author> = { email: 'upsert@example.com' }
        await authors.upsert(fresh, ['email'])
        const [stored] = await raw.query(`SELECT id FROM authors WHERE email = ${p(1)}`, [
          'upsert@example.com',
        ])
        expect(String(stored?.id)).toBe(fresh.id)
        expect(sharding.shardOfId(fresh.id!)).toBe(expectedShard('upsert@example.com', 64))
        const again: Partial<Author> = { email: 'upsert@example.com' }
        await authors.upsert(again, ['email'])
        const [after] = await raw.query(`SELECT id FROM authors WHERE email = ${p(1)}`, [
          'upsert@example.com',
        ])
        expect(String(after?.id)).toBe(fresh.id) // the row keeps its ID...
        expect(again.id).not.toBe(fresh.id) // ...while the object reports the unused new one
      })

      it('co-locates a child that points at a parent saved in the same call', async () => {
        const post = Object.assign(new Post(), {
          author: author(authorIds[2]!),
          title: 'child first',
        })
        const comment = Object.assign(new Comment(), { body: 'points up', post })
        await dataSource.getRepository(Comment).save(comment)
        const [row] = await raw.query(`SELECT id, post_id FROM comments WHERE body = ${p(1)}`, [
          'points up',
        ])
        expect(String(row?.post_id)).toBe(post.id)
        expect(sharding.shardOfId(String(row?.id))).toBe(sharding.shardOfId(post.id!))
        expect(sharding.shardOfId(post.id!)).toBe(sharding.shardOfId(authorIds[2]!))
      })

      it('finds the parent of a child through a saved relation, a reference, or its key column', async () => {
        const posts = dataSource.getRepository(Post)
        const post = await posts.save(
          Object.assign(new Post(), { author: author(authorIds[0]!), title: 'parent saved' }),
        )
        const comments = dataSource.getRepository(Comment)
        const byRelation = await comments.save(Object.assign(new Comment(), { body: 'r', post }))
        const byReference = await comments.save({ body: 'ref', post: { id: post.id } as Post })
        const byColumn = await dataSource
          .getRepository(CommentByColumn)
          .save(Object.assign(new CommentByColumn(), { body: 'col', postId: post.id }))
        // A new parent in the same call, named by the child's key column (still empty).
        const parent = Object.assign(new PostByColumn(), {
          authorId: authorIds[2]!,
          title: 'col parent',
        })
        const cascaded = await dataSource
          .getRepository(CommentByColumn)
          .save(Object.assign(new CommentByColumn(), { body: 'col cascade', post: parent }))
        for (const comment of [byRelation, byReference, byColumn]) {
          expect(sharding.shardOfId(comment.id!)).toBe(sharding.shardOfId(post.id!))
        }
        expect(sharding.shardOfId(cascaded.id!)).toBe(sharding.shardOfId(authorIds[2]!))
        const [row] = await raw.query(`SELECT post_id FROM comments WHERE body = ${p(1)}`, ['col'])
        expect(String(row?.post_id)).toBe(post.id)
      })

      it('falls back from a sameShardAs relation to its foreign-key column', async () => {
        const post = await dataSource
          .getRepository(PostWithAuthorKey)
          .save(Object.assign(new PostWithAuthorKey(), { authorId: authorIds[1]!, title: 'fk' }))
        expect(sharding.shardOfId(post.id!)).toBe(sharding.shardOfId(authorIds[1]!))
        expect(String((await storedPost('fk'))?.author_id)).toBe(authorIds[1])
      })

      it('follows plain objects through a cascade (the README quick start)', async () => {
        const saved = await dataSource.getRepository(Post).save({
          author: { id: authorIds[1]! } as Author,
          title: 'plain cascade',
          comments: [{ body: 'plain child' } as Comment],
        })
        const [row] = await raw.query(`SELECT id, post_id FROM comments WHERE body = ${p(1)}`, [
          'plain child',
        ])
        expect(String(row?.post_id)).toBe(saved.id)
        expect(sharding.shardOfId(String(row?.id))).toBe(sharding.shardOfId(saved.id!))
      })

      it('fails loudly on the NOT NULL key when listeners are off or SQL is raw', async () => {
        const before = await raw.query('SELECT COUNT(*) AS n FROM posts')
        await expect(
          dataSource
            .getRepository(PostByColumn)
            .save(Object.assign(new PostByColumn(), { authorId: authorIds[0]!, title: 'quiet' }), {
              listeners: false,
            }),
        ).rejects.toThrow(/shardflake: posts\.id .*listeners/)
        await expect(
          dataSource
            .createQueryBuilder()
            .insert()
            .into(PostByColumn)
            .values({ authorId: authorIds[0]!, title: 'quiet' })
            .callListeners(false)
            .execute(),
        ).rejects.toThrow(/shardflake: posts\.id .*listeners/)
        await expect(
          dataSource.query(`INSERT INTO posts (author_id, title) VALUES (${p(1)}, ${p(2)})`, [
            authorIds[0],
            'quiet',
          ]),
        ).rejects.toThrow(/shardflake: posts\.id .*listeners/)
        expect(await raw.query('SELECT COUNT(*) AS n FROM posts')).toEqual(before)
      })
    })
  }

  describe('database sources get the call’s query runner', () => {
    let raw: RawDatabase
    let dataSource: DataSource
    const seen: unknown[] = []
    let running = 0
    let mostAtOnce = 0
    let inner: InProcessSource

    /** Asks PostgreSQL, through the caller's connection, which backend serves it. */
    const probing = (inner: IdSource): IdSource => ({
      ...asAsync(inner),
      async nextIds(shard: number, count: number, context?: IdRequestContext) {
        running++
        mostAtOnce = Math.max(mostAtOnce, running)
        try {
          const rows = await context!.query!(
            "SELECT current_setting('sf.tx', true) AS tx, pg_sleep(0.01)",
            [],
          )
          seen.push(rows[0]?.tx)
          return inner.nextIds(shard, count)
        } finally {
          running--
        }
      },
    })

    beforeAll(async () => {
      raw = await freshDatabase('postgres', `sf_typeorm_${tag}runner_pg`)
      for (const statement of blogSchemaSql('postgres')) await raw.query(statement)
      inner = new InProcessSource({ sharding, shards: 'all' })
      dataSource = await blogDataSource(raw, probing(inner), { extra: { max: 2 } })
    })

    afterAll(async () => {
      await dataSource?.destroy()
      inner?.close()
      await raw?.close()
    })

    it('runs the source’s SQL inside the transaction, on the transaction’s own connection, when two save at the same moment', async () => {
      const author = await dataSource
        .getRepository(Author)
        .save(Object.assign(new Author(), { email: 'runner@example.com' }))
      seen.length = 0
      mostAtOnce = 0
      // Rounds of two transactions (the pool's two connections) that call save() in the same
      // turn of the event loop: their hooks run together, and only a batch per query runner
      // keeps one transaction's IDs off the other's connection.
      for (let round = 0; round < 4; round++) {
        let arrived = 0
        let release: () => void = () => {}
        const bothReady = new Promise<void>((resolve) => {
          release = resolve
        })
        await Promise.all(
          [0, 1].map((i) =>
            dataSource.transaction(async (manager) => {
              // A transaction-local setting: visible only on this connection, in this transaction.
              await manager.query("SELECT set_config('sf.tx', $1, true)", [`tx ${round}.${i}`])
              if (++arrived === 2) release()
              await bothReady
              await manager.save(Object.assign(new Post(), { author, title: `tx ${round}.${i}` }))
            }),
          ),
        )
      }
      const names = Array.from({ length: 8 }, (_, i) => `tx ${Math.floor(i / 2)}.${i % 2}`)
      expect([...seen].sort()).toEqual(names.sort())
      expect(mostAtOnce).toBe(2) // the two saves did overlap
      const stored = await raw.query("SELECT id, title FROM posts WHERE title LIKE 'tx %'")
      expect(stored.map((row) => String(row.title)).sort()).toEqual(names.sort())
    })

    it('sends the queries of a call spanning several shards one after another on its connection', async () => {
      // Authors on four different shards (their emails hash there), for posts on four shards.
      const emails = Array.from({ length: 40 }, (_, i) => `${i}@q`).filter(
        (email, i, all) =>
          all.findIndex((other) => sharding.shardForKey(other) === sharding.shardForKey(email)) ===
          i,
      )
      const authors = await dataSource
        .getRepository(Author)
        .save(emails.slice(0, 4).map((email) => Object.assign(new Author(), { email })))
      // Queries TypeORM has started and not finished, as its query events see them.
      let onConnection = 0
      let mostOnConnection = 0
      const probe = (query: string) => query.includes('pg_sleep')
      dataSource.subscribers.push({
        beforeQuery: (event) => {
          if (probe(event.query)) mostOnConnection = Math.max(mostOnConnection, ++onConnection)
        },
        afterQuery: (event) => {
          if (probe(event.query)) onConnection--
        },
      })
      seen.length = 0
      mostAtOnce = 0
      await dataSource.transaction(async (manager) => {
        await manager.query("SELECT set_config('sf.tx', 'multi', true)")
        await manager.save(
          authors.map((author, i) => Object.assign(new Post(), { author, title: `multi ${i}` })),
        )
      })
      const shards = new Set(authors.map((author) => sharding.shardOfId(author.id)))
      expect(shards.size).toBeGreaterThan(1)
      expect(seen).toEqual([...shards].map(() => 'multi'))
      expect(mostAtOnce).toBeGreaterThan(1) // the shards are asked for concurrently ...
      expect(mostOnConnection).toBe(1) // ... and their queries wait for each other
      const [stored] = await raw.query("SELECT COUNT(*) AS n FROM posts WHERE title LIKE 'multi %'")
      expect(Number(stored?.n)).toBe(4)
    })
  })
}

function recorder(queries: string[]): Logger {
  return {
    logQuery: (query) => {
      queries.push(query)
    },
    logQueryError: () => {},
    logQuerySlow: () => {},
    logSchemaBuild: () => {},
    logMigration: () => {},
    log: () => {},
  }
}
