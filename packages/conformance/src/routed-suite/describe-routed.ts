import { setTimeout as sleep } from 'node:timers/promises'
import { type IdSource, type Sharding, ShardMap } from '@shardflake/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { blogSchemaSql, type OrmId } from '../blog'
import type { Dialect } from '../databases'
import {
  type HomeServer,
  type HomeServers,
  shardBits,
  startHomeServers,
} from '../homes/home-servers'
import { testSharding } from '../shardings'
import type { RoutedBlogThroughOrm, RoutedSuiteOptions } from './routed-blog'
import { inProcessCase, type RoutedSourceCase } from './routed-sources'
import { SuiteDirectory } from './suite-directory'

const suiteSharding = testSharding()
/** The suite's homes: three servers, uneven ranges. */
const homesOf = (sharding: Sharding) =>
  new ShardMap(sharding, [
    { from: 0, to: 20, target: 'a' },
    { from: 21, to: 41, target: 'b' },
    { from: 42, to: 63, target: 'c' },
  ])
const TABLES = ['authors', 'posts', 'comments', 'keyed'] as const

/**
 * Counts INSERT statements on `posts` on a server, read through raw SQL on the server itself:
 * on PostgreSQL a statement-level trigger, on MariaDB the server's `Com_insert` counter (the
 * servers are this suite's own, so nothing else inserts while a test measures).
 */
function statementCounterSql(dialect: Dialect): string[] {
  if (dialect !== 'postgres') return []
  return [
    'CREATE TABLE insert_statements (tbl TEXT NOT NULL)',
    `CREATE FUNCTION count_insert_statement() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN INSERT INTO insert_statements VALUES (TG_TABLE_NAME); RETURN NULL; END $$`,
    'CREATE TRIGGER posts_insert_statements AFTER INSERT ON posts FOR EACH STATEMENT EXECUTE FUNCTION count_insert_statement()',
  ]
}

async function insertStatements(dialect: Dialect, server: HomeServer): Promise<number> {
  if (dialect === 'postgres') {
    const rows = await server.query(
      "SELECT count(*)::int AS n FROM insert_statements WHERE tbl = 'posts'",
    )
    return Number(rows[0]!.n)
  }
  const rows = await server.query("SHOW GLOBAL STATUS LIKE 'Com_insert'")
  return Number((rows[0] as { Value: string }).Value)
}

/**
 * The contract of an adapter that puts rows on their shard's server, checked through raw SQL on
 * each of three throwaway servers of the dialect (a, b, c; shards 0-20, 21-41, 42-63): every row
 * (authors, posts, comments, keyed) is on the server holding the shard of its ID; a save spanning
 * servers sends one INSERT per server; a read by ID with a relation load goes to one server; a
 * transaction refusing a row of another server (`WRONG_SERVER`) leaves nothing written; a
 * fan-out returns the newest N in ID order.
 *
 * The servers start once; the cases then run with each of `sources` in turn (a describe each,
 * the tables emptied before it), and for a source drawing IDs in the database the suite checks
 * through raw SQL that every shard's IDs were drawn on its home.
 *
 * @example
 * ```ts
 * describeRoutedAdapter('TypeORM / PostgreSQL', {
 *   dialect: 'postgres',
 *   sources: routedSources('postgres', { postgres, mysql, redis }),
 *   setup: (context) => routedBlogOnTypeorm(context),
 * })
 * ```
 */
export function describeRoutedAdapter(name: string, options: RoutedSuiteOptions): void {
  const { dialect } = options
  const sources = options.sources ?? [inProcessCase]
  const names = new Set(sources.map((source) => source.name))
  if (sources.length === 0 || names.size !== sources.length) {
    throw new Error('describeRoutedAdapter needs sources with distinct names.')
  }
  let servers: HomeServers | undefined

  describe(`routed adapter conformance: ${name}`, () => {
    beforeAll(async () => {
      servers = await startHomeServers(dialect)
      for (const server of servers.servers) {
        for (const sql of [...blogSchemaSql(dialect), ...statementCounterSql(dialect)]) {
          await server.query(sql)
        }
      }
    }, 180_000)

    afterAll(async () => {
      await servers?.close()
    }, 60_000)

    for (const sourceCase of sources) {
      describeWithSource(dialect, options, sourceCase, () => {
        if (!servers) throw new Error('The home servers did not start.')
        return servers
      })
    }
  })
}

/** Empties the blog tables on every server, children first (the next source starts afresh). */
async function emptyTables(servers: HomeServers): Promise<void> {
  for (const server of servers.servers) {
    for (const table of ['comments', 'posts', 'keyed', 'tagged', 'authors']) {
      await server.query(`DELETE FROM ${table}`)
    }
  }
}

/** The suite's cases with one source, on the servers the enclosing describe started. */
function describeWithSource(
  dialect: Dialect,
  options: RoutedSuiteOptions,
  sourceCase: RoutedSourceCase,
  homeServers: () => HomeServers,
): void {
  const sharding = sourceCase.sharding ?? suiteSharding
  const map = homesOf(sharding)
  const homeOf = (shard: number) => map.targetFor(shard)
  const directory = new SuiteDirectory(map)
  let servers: HomeServers
  let source: IdSource
  let blog: RoutedBlogThroughOrm
  /** One author per server, by server name. */
  const authorOn: Record<string, OrmId> = {}
  let titles = 0
  const title = (what: string) => `${what} ${++titles}`

  const serverOfId = (id: OrmId) => homeOf(shardBits(sharding, String(id)))

  async function expectAllAtHome(): Promise<Record<string, Record<string, number>>> {
    const counts: Record<string, Record<string, number>> = {}
    for (const table of TABLES) {
      counts[table] = {}
      expect(
        await servers.misplaced({ table, sharding, homeOf, counts: counts[table] }),
        `rows of ${table} on a server that is not their shard's home`,
      ).toEqual([])
    }
    return counts
  }

  async function rowsTitled(titlesWanted: readonly string[]): Promise<string[]> {
    const found: string[] = []
    for (const server of servers.servers) {
      const rows = await server.query('SELECT title FROM posts')
      for (const { title } of rows as { title: string }[]) {
        if (titlesWanted.includes(title)) found.push(`${server.name}: ${title}`)
      }
    }
    return found
  }

  describe(`source: ${sourceCase.name}`, () => {
    beforeAll(async () => {
      servers = homeServers()
      await emptyTables(servers)
      source = await sourceCase.create({ dialect, sharding, map, servers })
      blog = await options.setup({ dialect, sharding, map, directory, urls: servers.urls, source })
      for (let i = 0; Object.keys(authorOn).length < 3; i++) {
        if (i >= 64) throw new Error('64 authors did not cover the three servers.')
        const id = await blog.createAuthor(`writer-${i}@example.com`)
        authorOn[serverOfId(id)] ??= id
      }
    }, 180_000)

    afterAll(async () => {
      await blog?.close()
      await source?.close()
    }, 60_000)

    it('writes each author on the server of the shard its email gives', async () => {
      const counts = await expectAllAtHome()
      for (const server of ['a', 'b', 'c']) expect(counts.authors![server]).toBeGreaterThan(0)
    })

    it('writes a post and its comments on the author’s server, all on the author’s shard', async () => {
      for (const server of ['a', 'b', 'c']) {
        const authorId = authorOn[server]!
        const { postId, commentIds } = await blog.createPostWithComments(
          { authorId, title: title('with comments') },
          ['first', 'second'],
        )
        const shard = shardBits(sharding, String(authorId))
        for (const id of [postId, ...commentIds])
          expect(shardBits(sharding, String(id))).toBe(shard)
        const raw = servers.server(server)
        const p = dialect === 'postgres' ? '$1' : '?'
        expect(
          await raw.query(`SELECT id FROM posts WHERE id = ${p}`, [String(postId)]),
        ).toHaveLength(1)
        expect(
          await raw.query(`SELECT id FROM comments WHERE post_id = ${p}`, [String(postId)]),
        ).toHaveLength(2)
      }
      await expectAllAtHome()
    })

    it('writes a row keyed by a shard key on the server of the key’s shard', async () => {
      // Digit strings are integers: key mod 64 is the shard.
      for (const [key, server] of [
        ['5', 'a'],
        ['30', 'b'],
        ['50', 'c'],
      ] as const) {
        const id = await blog.createKeyed(key)
        expect(shardBits(sharding, String(id))).toBe(Number(key))
        const p = dialect === 'postgres' ? '$1' : '?'
        const found = await servers
          .server(server)
          .query(`SELECT id FROM keyed WHERE id = ${p}`, [String(id)])
        expect(found).toHaveLength(1)
      }
      await expectAllAtHome()
    })

    it('holds a write to a shard being moved until the switch ends, then writes it at its home', async () => {
      // Shard 5 (the key '5') is of the range 0-20, on server a.
      await directory.setState(0, 'switching')
      let settled = false
      let write: Promise<OrmId> | undefined
      try {
        write = blog.createKeyed('5').finally(() => {
          settled = true
        })
        await sleep(300)
        expect(settled, 'a write to a switching shard must wait').toBe(false)
      } finally {
        await directory.setState(0, 'serving')
      }
      const id = await write
      const p = dialect === 'postgres' ? '$1' : '?'
      const found = await servers
        .server('a')
        .query(`SELECT id FROM keyed WHERE id = ${p}`, [String(id)])
      expect(found).toHaveLength(1)
      await expectAllAtHome()
    })

    it('splits a save spanning servers into one INSERT per server', async () => {
      const before = await Promise.all(servers.servers.map((s) => insertStatements(dialect, s)))
      const posts = ['a', 'b', 'c', 'a', 'b', 'c', 'c'].map((server) => ({
        authorId: authorOn[server]!,
        title: title('batch'),
      }))
      const ids = await blog.createPosts(posts)
      expect(ids).toHaveLength(posts.length)
      expect(ids.map(serverOfId)).toEqual(posts.map((post) => serverOfId(post.authorId)))
      const after = await Promise.all(servers.servers.map((s) => insertStatements(dialect, s)))
      expect(after.map((n, i) => n - before[i]!)).toEqual([1, 1, 1])
      await expectAllAtHome()
    })

    it('reads a post and its comments by ID from its server alone', async () => {
      const readMe = title('read me')
      const { postId } = await blog.createPostWithComments(
        { authorId: authorOn.b!, title: readMe },
        ['one', 'two', 'three'],
      )
      const before = { ...blog.statementsSent() }
      const found = await blog.findPostWithComments(postId)
      const after = blog.statementsSent()
      expect(found?.title).toBe(readMe)
      expect([...(found?.comments ?? [])].sort()).toEqual(['one', 'three', 'two'])
      const sent = Object.fromEntries(
        ['a', 'b', 'c'].map((server) => [server, (after[server] ?? 0) - (before[server] ?? 0)]),
      )
      expect(sent.b).toBeGreaterThan(0)
      expect({ a: sent.a, c: sent.c }).toEqual({ a: 0, c: 0 })
    })

    it('commits a transaction whose rows are all on its server', async () => {
      const wanted = [title('tx'), title('tx')]
      await blog.createPostsInTransaction(wanted.map((t) => ({ authorId: authorOn.c!, title: t })))
      expect((await rowsTitled(wanted)).sort()).toEqual(wanted.map((t) => `c: ${t}`).sort())
    })

    it('refuses a row of another server inside a transaction, and writes nothing', async () => {
      const wanted = [title('tx home'), title('tx foreign')]
      const outcome = await blog
        .createPostsInTransaction([
          { authorId: authorOn.a!, title: wanted[0]! },
          { authorId: authorOn.b!, title: wanted[1]! },
        ])
        .then(
          () => undefined,
          (error: unknown) => error,
        )
      expect(outcome, 'the transaction must reject').toBeInstanceOf(Error)
      expect((outcome as { code?: unknown }).code).toBe('WRONG_SERVER')
      expect(await rowsTitled(wanted)).toEqual([])
      await expectAllAtHome()
    })

    it('fans out explicitly: the newest posts of every server, in ID order, with a limit', async () => {
      await blog.createPosts(
        ['a', 'b', 'c', 'b', 'a', 'c'].map((server) => ({
          authorId: authorOn[server]!,
          title: title('fan'),
        })),
      )
      const all: bigint[] = []
      for (const server of servers.servers) {
        const rows = await server.query(
          dialect === 'postgres'
            ? 'SELECT id::text AS id FROM posts'
            : 'SELECT CAST(id AS CHAR) AS id FROM posts',
        )
        all.push(...(rows as { id: string }[]).map((row) => BigInt(row.id)))
      }
      expect(new Set(all.map((id) => serverOfId(id))).size).toBe(3)
      const expected = all.sort((x, y) => (x > y ? -1 : x < y ? 1 : 0)).slice(0, 5)
      const newest = await blog.newestPosts(5)
      expect(newest.map((id) => BigInt(id))).toEqual(expected)
    })

    it('fans out by home only: rows a moved shard left on its old server are never read', async () => {
      await blog.createPosts(
        ['a', 'b', 'c'].map((server) => ({ authorId: authorOn[server]!, title: title('fresh') })),
      )
      const p = (i: number) => (dialect === 'postgres' ? `$${i}` : '?')
      const text = (column: string) =>
        dialect === 'postgres' ? `${column}::text` : `CAST(${column} AS CHAR)`
      // Rows of a shard of server a, newer than every post, left on server b (the old copies of a
      // shard moved from b to a, deleted at their new home since): b must not answer with them.
      const [newest] = (await servers
        .server('a')
        .query(
          `SELECT ${text('p.id')} AS id, ${text('p.author_id')} AS author_id, a.email FROM posts p JOIN authors a ON a.id = p.author_id ORDER BY p.id DESC LIMIT 1`,
        )) as { id: string; author_id: string; email: string }[]
      const b = servers.server('b')
      const timeShift = BigInt(sharding.layout.shifts.shard) + BigInt(sharding.layout.shardBits)
      const stale = [1n, 2n, 3n, 4n].map((k) => BigInt(newest!.id) + ((1000n + k) << timeShift))
      await b.query(`INSERT INTO authors (id, email) VALUES (${p(1)}, ${p(2)})`, [
        newest!.author_id,
        `old-copy-${newest!.email}`,
      ])
      for (const id of stale) {
        await b.query(
          `INSERT INTO posts (id, author_id, title) VALUES (${p(1)}, ${p(2)}, ${p(3)})`,
          [String(id), newest!.author_id, 'old copy'],
        )
      }
      const copies = [{ on: b, postIds: stale.map(String), authorId: newest!.author_id }]
      try {
        const homes: bigint[] = []
        for (const server of servers.servers) {
          const rows = await server.query(`SELECT ${text('id')} AS id FROM posts`)
          for (const { id } of rows as { id: string }[]) {
            if (serverOfId(id) === server.name) homes.push(BigInt(id))
          }
        }
        const expected = homes.sort((x, y) => (x > y ? -1 : x < y ? 1 : 0)).slice(0, 3)
        const found = await blog.newestPosts(3)
        expect(found.map((id) => BigInt(id))).toEqual(expected)
      } finally {
        for (const { on, postIds, authorId } of copies) {
          for (const id of postIds) await on.query(`DELETE FROM posts WHERE id = ${p(1)}`, [id])
          await on.query(`DELETE FROM authors WHERE id = ${p(1)}`, [authorId])
        }
      }
      await expectAllAtHome()
    })

    if (sourceCase.drawn) {
      const drawnOn = sourceCase.drawn
      it('draws every shard’s IDs on the shard’s home server', async () => {
        const drawn = await drawnOn(servers)
        expect(
          drawn.filter(({ server, shard }) => homeOf(shard) !== server),
          'shards whose IDs were drawn on a server that is not their home',
        ).toEqual([])
        expect(new Set(drawn.map(({ server }) => server))).toEqual(new Set(['a', 'b', 'c']))
      })
    }
  })
}
