/**
 * Every README quick start the runner runs: for each README, its variants (the servers it needs,
 * the environment the README tells the reader to set) and the check of what it left behind,
 * through raw SQL. The steps themselves are read from the README's markers (see `blocks.ts`).
 *
 * To add a README (a new adapter): mark its blocks, add an entry here with a check that decodes
 * the IDs its first inserts stored, and run `pnpm test:readmes -t <package>`.
 */
import { instagram } from '@shardflake/core'
import { ensure, ensureCount, ensurePlaced, shardOfId, shardOfKey } from './checks.ts'
import {
  mariadbDatabase,
  mariadbServer,
  postgresDatabase,
  redisServer,
  type SqlDatabase,
} from './resources.ts'
import { type Variant, variant } from './run-quick-start.ts'

/** A README and the ways to run its quick start, by variant name (`default` without variants). */
export interface QuickStart {
  /** The README, relative to the repository root. */
  readonly readme: string
  readonly variants: Readonly<Record<string, Variant>>
}

/**
 * The Prisma quick start's rows: the user on the shard of its email, the post on the user's,
 * the comment on the post's (64 logical shards).
 */
async function prismaBlog(database: SqlDatabase, output: string): Promise<void> {
  // Quoted as each dialect quotes Prisma's mixed-case names; BIGINTs read as decimal strings.
  const sql =
    database.kind === 'postgres'
      ? {
          users: 'SELECT id::text AS id, email FROM "User"',
          posts: 'SELECT id::text AS id, "userId"::text AS parent FROM "Post"',
          comments: 'SELECT id::text AS id, "postId"::text AS parent FROM "Comment"',
        }
      : {
          users: 'SELECT id, email FROM `User`',
          posts: 'SELECT id, userId AS parent FROM `Post`',
          comments: 'SELECT id, postId AS parent FROM `Comment`',
        }
  const users = await database.query(sql.users)
  ensureCount(users, 1, 'users')
  ensurePlaced(users, (u) => shardOfKey(String(u.email), 64), 'user')
  const posts = await database.query(sql.posts)
  ensureCount(posts, 1, 'posts')
  ensurePlaced(posts, (p) => shardOfId(p.parent), 'post')
  const comments = await database.query(sql.comments)
  ensureCount(comments, 1, 'comments')
  ensurePlaced(comments, (c) => shardOfId(c.parent), 'comment')
  const shard = shardOfKey('ada@example.com', 64)
  ensure(
    output.includes(`[ ${shard}, ${shard}, ${shard} ]`),
    `the quick start does not print [ ${shard}, ${shard}, ${shard} ]`,
  )
}

/**
 * The Sequelize quick start's rows (tables `Users`, `Posts`, `Comments`, as Sequelize names its
 * models' tables): the user on the shard of its email, the post on its author's, the comment on
 * the post's (64 logical shards).
 */
/** The Drizzle quick start's user, post and two comments, on both servers. */
async function drizzleBlog(database: SqlDatabase, output: string): Promise<void> {
  const text = database.kind === 'postgres' ? '::text' : ''
  const users = await database.query(`SELECT id${text} AS id, email FROM users`)
  ensureCount(users, 1, 'users')
  ensurePlaced(users, (u) => shardOfKey(String(u.email), 64), 'user')
  const posts = await database.query(`SELECT id${text} AS id, user_id${text} AS parent FROM posts`)
  ensureCount(posts, 1, 'posts')
  ensurePlaced(posts, (p) => shardOfId(p.parent), 'post')
  const comments = await database.query(
    `SELECT id${text} AS id, post_id${text} AS parent FROM comments`,
  )
  ensureCount(comments, 2, 'comments')
  ensurePlaced(comments, (c) => shardOfId(c.parent), 'comment')
  const shard = shardOfKey('ada@example.com', 64)
  const printed = `[ ${shard}, ${shard}, ${shard}, ${shard} ]`
  ensure(output.includes(printed), `the quick start does not print ${printed}`)
}

async function sequelizeBlog(database: SqlDatabase, output: string): Promise<void> {
  const sql =
    database.kind === 'postgres'
      ? {
          users: 'SELECT id::text AS id, email FROM "Users"',
          posts: 'SELECT id::text AS id, "authorId"::text AS parent FROM "Posts"',
          comments: 'SELECT id::text AS id, "postId"::text AS parent FROM "Comments"',
        }
      : {
          users: 'SELECT id, email FROM `Users`',
          posts: 'SELECT id, authorId AS parent FROM `Posts`',
          comments: 'SELECT id, postId AS parent FROM `Comments`',
        }
  const users = await database.query(sql.users)
  ensureCount(users, 1, 'users')
  ensurePlaced(users, (u) => shardOfKey(String(u.email), 64), 'user')
  const posts = await database.query(sql.posts)
  ensureCount(posts, 1, 'posts')
  ensurePlaced(posts, (p) => shardOfId(p.parent), 'post')
  const comments = await database.query(sql.comments)
  ensureCount(comments, 1, 'comments')
  ensurePlaced(comments, (c) => shardOfId(c.parent), 'comment')
  const shard = shardOfKey('ada@example.com', 64)
  ensure(
    output.includes(`[ ${shard}, ${shard}, ${shard} ]`),
    `the quick start does not print [ ${shard}, ${shard}, ${shard} ]`,
  )
}

/**
 * The horizontal-sharding recipes (`src/homes.ts`) split 64 logical shards over two servers,
 * 0-31 on `a` and 32-63 on `b`: every row of `table` must sit on the server of its shard, and on
 * the shard `expected` gives it.
 */
async function ensureHomes(
  servers: { a: SqlDatabase; b: SqlDatabase },
  sql: string,
  counts: { a: number; b: number },
  expected: (row: Record<string, unknown>) => number,
  what: string,
): Promise<void> {
  for (const [name, database] of Object.entries(servers)) {
    const rows = await database.query(sql)
    ensureCount(rows, counts[name as 'a' | 'b'], `${what} on server ${name}`)
    ensurePlaced(rows, expected, `${what} on server ${name}`)
    for (const row of rows) {
      const home = shardOfId(row.id) < 32 ? 'a' : 'b'
      ensure(home === name, `${what} ${String(row.id)} is on server ${name}, its home is ${home}`)
    }
  }
}

/** What is printed as the post's server and ID: `a 7451...n`. */
function printedId(output: string, server: string, file: string): bigint {
  const printed = new RegExp(`^${server} (\\d+)n$`, 'm').exec(output)
  ensure(printed !== null, `${file} does not print ${server} and an ID`)
  return BigInt(printed[1]!)
}

/** The sequence value an ID of shard `shard` was made of (time and sequence, as next_id() counts). */
function sequenceValue(id: bigint, shard: number): bigint {
  const { time, sequence, shard: actual } = instagram.decompose(id)
  ensure(actual === shard, `the ID ${id} is on shard ${actual}, not ${shard}`)
  return (BigInt(time) << BigInt(instagram.sequenceBits)) | BigInt(sequence)
}

/**
 * The core README's shard homes, after homes.ts (one post of authors 31341, 7, 1000 and 42, each
 * on the server the first map gives its shard), move.ts (shards 0-15, author 7's post, from a to c,
 * a's copy deleted) and ids.ts (author 80's two posts, shards 16-20 moved to c): every post on
 * its home, and the directory on a as the two moves left it.
 */
async function homesPlaced(servers: {
  a: SqlDatabase
  b: SqlDatabase
  c: SqlDatabase
}): Promise<void> {
  const homeOf = (shard: number) => (shard <= 20 ? 'c' : shard <= 41 ? 'b' : 'c')
  const titles = {
    a: [],
    b: ['hello from 1000'],
    c: [
      'hello again from 80',
      'hello from 31341',
      'hello from 42',
      'hello from 7',
      'hello from 80',
    ],
  }
  for (const [name, database] of Object.entries(servers)) {
    const posts = (await database.query('SELECT id::text AS id, title FROM posts')).sort((x, y) =>
      String(x.title) < String(y.title) ? -1 : 1,
    )
    const expected = titles[name as keyof typeof titles]
    ensureCount(posts, expected.length, `posts on server ${name}`)
    expected.forEach((title, i) => {
      const post = posts[i]!
      ensure(post.title === title, `server ${name} holds ${String(post.title)}, not ${title}`)
      const author = /from (\d+)$/.exec(title)![1]!
      ensurePlaced([post], () => shardOfKey(author, 64), `the post on server ${name}`)
      ensure(homeOf(shardOfId(post.id)) === name, `server ${name} is not the home of ${title}`)
    })
  }
  const directory = await servers.a.query('SELECT entries FROM shardflake_directory')
  const entries = directory[0]?.entries as {
    from: number
    to: number
    server: string
    state: string
  }[]
  for (let shard = 0; shard < 64; shard++) {
    const entry = entries.find((e) => e.from <= shard && shard <= e.to)
    ensure(
      entry?.server === homeOf(shard) && entry.state === 'serving',
      `the directory on server a does not give shard ${shard} to ${homeOf(shard)}: ${JSON.stringify(entries)}`,
    )
  }
}

/**
 * ids.ts's two IDs of shard 16: the first is the last value a's sequence of the shard issued, the
 * second one of c's, above a's fence; a refuses to draw more.
 */
async function idsMoved(
  servers: { a: SqlDatabase; c: SqlDatabase },
  output: string,
): Promise<void> {
  const shard = shardOfKey(80n, 64)
  const before = printedId(output, 'a', 'ids.ts')
  const after = printedId(output, 'c', 'ids.ts')
  const stored = await servers.c.query(
    "SELECT id::text AS id, title FROM posts WHERE title LIKE '%from 80' ORDER BY title DESC",
  )
  ensure(
    stored.map((post) => post.id).join() === `${before},${after}`,
    `the posts of author 80 on c are not the IDs ids.ts printed (${before}, ${after}): ${JSON.stringify(stored)}`,
  )
  const refused = await servers.a.query(`SELECT shard_${shard}.next_id()::text AS id`).then(
    (rows) => `issued ${String(rows[0]?.id)}`,
    (error: { code?: string }) => error.code,
  )
  ensure(refused === 'SF005', `server a still issues IDs of shard ${shard}: ${refused}`)
  const [onA] = await servers.a.query(
    `SELECT s.last_value::text AS last, m.fence_value::text AS fence, m.moved_to IS NOT NULL AS moved
       FROM shard_${shard}.id_seq s, shardflake.shards m WHERE m.shard = ${shard}`,
  )
  ensure(
    onA?.last === String(sequenceValue(before, shard)),
    `the ID before the move (${before}) is not the last of a's sequence of shard ${shard}: ${JSON.stringify(onA)}`,
  )
  ensure(
    onA.moved === true && onA.fence !== null,
    `server a does not record shard ${shard} as moved away: ${JSON.stringify(onA)}`,
  )
  const [onC] = await servers.c.query(`SELECT last_value::text AS last FROM shard_${shard}.id_seq`)
  ensure(
    onC?.last === String(sequenceValue(after, shard)),
    `the ID after the move (${after}) is not the last of c's sequence of shard ${shard}: ${JSON.stringify(onC)}`,
  )
  ensure(
    BigInt(String(onC.last)) > BigInt(String(onA.fence)),
    `c's sequence of shard ${shard} (${String(onC.last)}) is not above a's fence (${String(onA.fence)})`,
  )
  const [next] = await servers.c.query(`SELECT shard_${shard}.next_id()::text AS id`)
  ensure(
    BigInt(String(next?.id)) > after,
    `c's next ID of shard ${shard} (${String(next?.id)}) is not above ${after}`,
  )
}

/** What the README tells an offline reader to set for `prisma generate`. */
const PRISMA_OFFLINE = { PRISMA_SCHEMA_ENGINE_BINARY: '/bin/false' }

export const QUICK_STARTS: readonly QuickStart[] = [
  {
    readme: 'packages/typeorm/README.md',
    variants: {
      // The quick start, then the horizontal-sharding recipe on two more databases.
      default: variant({
        resources: { app: postgresDatabase(), a: postgresDatabase(), b: postgresDatabase() },
        env: ({ app, a, b }) => ({
          DATABASE_URL: app.url,
          SERVER_A_URL: a.url,
          SERVER_B_URL: b.url,
        }),
        async check({ resources: { app, a, b }, output }) {
          // homes.ts: tenant 7's two posts (one with a comment) on a, tenant 40's on b.
          await ensureHomes(
            { a, b },
            'SELECT id::text AS id, "tenantId"::text AS tenant FROM post',
            { a: 2, b: 1 },
            (p) => shardOfKey(String(p.tenant), 64),
            'post',
          )
          await ensureHomes(
            { a, b },
            'SELECT id::text AS id, "postId"::text AS parent FROM comment',
            { a: 1, b: 0 },
            (c) => shardOfId(c.parent),
            'comment',
          )
          ensure(/^1\n3$/m.test(output), 'homes.ts does not print 1, then 3')
          const posts = await app.query('SELECT id::text, "tenantId"::text AS "tenantId" FROM post')
          ensureCount(posts, 1, 'posts')
          ensurePlaced(posts, (p) => shardOfKey(String(p.tenantId), 2000), 'post')
          const comments = await app.query(
            'SELECT id::text, "postId"::text AS "postId" FROM comment',
          )
          ensureCount(comments, 2, 'comments')
          ensurePlaced(comments, (c) => shardOfId(c.postId), 'comment')
          ensure(output.includes('[ 1341, 1341 ]'), 'the quick start does not print [ 1341, 1341 ]')
        },
      }),
    },
  },
  {
    readme: 'packages/prisma/README.md',
    variants: {
      postgres: variant({
        resources: { app: postgresDatabase() },
        env: ({ app }) => ({ DATABASE_URL: app.url, ...PRISMA_OFFLINE }),
        check: ({ resources: { app }, output }) => prismaBlog(app, output),
      }),
      mariadb: variant({
        resources: { app: mariadbDatabase() },
        env: ({ app }) => ({ DATABASE_URL: app.url, ...PRISMA_OFFLINE }),
        check: ({ resources: { app }, output }) => prismaBlog(app, output),
      }),
    },
  },
  {
    readme: 'packages/mikro-orm/README.md',
    variants: {
      // The quick start, then the horizontal-sharding recipe on two more databases.
      default: variant({
        resources: { app: postgresDatabase(), a: postgresDatabase(), b: postgresDatabase() },
        env: ({ app, a, b }) => ({
          DATABASE_URL: app.url,
          SERVER_A_URL: a.url,
          SERVER_B_URL: b.url,
        }),
        async check({ resources: { app, a, b }, output }) {
          // homes.ts: ada on a with two posts (one with a comment), bob on b with one.
          await ensureHomes(
            { a, b },
            'SELECT id::text AS id, email FROM author',
            { a: 1, b: 1 },
            (u) => shardOfKey(String(u.email), 64),
            'author',
          )
          await ensureHomes(
            { a, b },
            'SELECT id::text AS id, author_id::text AS parent FROM post',
            { a: 2, b: 1 },
            (p) => shardOfId(p.parent),
            'post',
          )
          await ensureHomes(
            { a, b },
            'SELECT id::text AS id, post_id::text AS parent FROM comment',
            { a: 1, b: 0 },
            (c) => shardOfId(c.parent),
            'comment',
          )
          ensure(/^1 3$/m.test(output), 'homes.ts does not print 1 3')
          const users = await app.query('SELECT id::text AS id, email FROM "user"')
          ensureCount(users, 1, 'users')
          ensurePlaced(users, (u) => shardOfKey(String(u.email), 64), 'user')
          const posts = await app.query(
            'SELECT id::text AS id, author_id::text AS parent FROM post',
          )
          ensureCount(posts, 1, 'posts')
          ensurePlaced(posts, (p) => shardOfId(p.parent), 'post')
          const shard = shardOfKey('ada@example.com', 64)
          ensure(
            output.includes(`${shard} ${shard}`),
            `the quick start does not print ${shard} ${shard}`,
          )
        },
      }),
    },
  },
  {
    readme: 'packages/drizzle/README.md',
    variants: {
      // The quick start, then the horizontal-sharding recipe on two more databases.
      postgres: variant({
        resources: { app: postgresDatabase(), a: postgresDatabase(), b: postgresDatabase() },
        env: ({ app, a, b }) => ({
          DATABASE_URL: app.url,
          SERVER_A_URL: a.url,
          SERVER_B_URL: b.url,
        }),
        async check({ resources: { app, a, b }, output }) {
          // homes.ts: tenant 7's post (with its comment) on a, tenant 40's on b.
          await ensureHomes(
            { a, b },
            'SELECT id::text AS id, tenant_id::text AS tenant FROM posts',
            { a: 1, b: 1 },
            (p) => shardOfKey(String(p.tenant), 64),
            'post',
          )
          await ensureHomes(
            { a, b },
            'SELECT id::text AS id, post_id::text AS parent FROM comments',
            { a: 1, b: 0 },
            (c) => shardOfId(c.parent),
            'comment',
          )
          ensure(/^1\n2$/m.test(output), 'homes.ts does not print 1, then 2')
          await drizzleBlog(app, output)
        },
      }),
      mariadb: variant({
        resources: { app: mariadbDatabase() },
        env: ({ app }) => ({ DATABASE_URL: app.url }),
        check: ({ resources: { app }, output }) => drizzleBlog(app, output),
      }),
    },
  },
  {
    readme: 'packages/kysely/README.md',
    variants: {
      // The quick start, then the horizontal-sharding recipe on two more databases.
      default: variant({
        resources: { app: postgresDatabase(), a: postgresDatabase(), b: postgresDatabase() },
        env: ({ app, a, b }) => ({
          DATABASE_URL: app.url,
          SERVER_A_URL: a.url,
          SERVER_B_URL: b.url,
        }),
        async check({ resources: { app, a, b }, output }) {
          // homes.ts: ada on a with two posts, bob on b with one.
          await ensureHomes(
            { a, b },
            'SELECT id::text AS id, email FROM users',
            { a: 1, b: 1 },
            (u) => shardOfKey(String(u.email), 64),
            'user',
          )
          await ensureHomes(
            { a, b },
            'SELECT id::text AS id, author_id::text AS parent FROM posts',
            { a: 2, b: 1 },
            (p) => shardOfId(p.parent),
            'post',
          )
          ensure(/^1 3$/m.test(output), 'homes.ts does not print 1 3')
          const users = await app.query('SELECT id::text AS id, email FROM users')
          ensureCount(users, 1, 'users')
          ensurePlaced(users, (u) => shardOfKey(String(u.email), 64), 'user')
          const posts = await app.query(
            'SELECT id::text AS id, author_id::text AS parent FROM posts',
          )
          ensureCount(posts, 1, 'posts')
          ensurePlaced(posts, (p) => shardOfId(p.parent), 'post')
          const shard = shardOfKey('ada@example.com', 64)
          ensure(
            new RegExp(`^${shard} ${shard}$`, 'm').test(output),
            `the quick start does not print ${shard} ${shard}`,
          )
        },
      }),
    },
  },
  {
    readme: 'packages/sequelize/README.md',
    variants: {
      // The quick start, then the horizontal-sharding recipe on two more databases.
      postgres: variant({
        resources: { app: postgresDatabase(), a: postgresDatabase(), b: postgresDatabase() },
        env: ({ app, a, b }) => ({
          DATABASE_URL: app.url,
          SERVER_A_URL: a.url,
          SERVER_B_URL: b.url,
        }),
        async check({ resources: { app, a, b }, output }) {
          // homes.ts: ada on a with two posts (one with a comment), bob on b.
          await ensureHomes(
            { a, b },
            'SELECT id::text AS id, email FROM "Users"',
            { a: 1, b: 1 },
            (u) => shardOfKey(String(u.email), 64),
            'user',
          )
          await ensureHomes(
            { a, b },
            'SELECT id::text AS id, "authorId"::text AS parent FROM "Posts"',
            { a: 2, b: 0 },
            (p) => shardOfId(p.parent),
            'post',
          )
          await ensureHomes(
            { a, b },
            'SELECT id::text AS id, "postId"::text AS parent FROM "Comments"',
            { a: 1, b: 0 },
            (c) => shardOfId(c.parent),
            'comment',
          )
          ensure(/^Hello \d+ 2$/m.test(output), 'homes.ts does not print Hello, an ID and 2')
          await sequelizeBlog(app, output)
        },
      }),
      mariadb: variant({
        resources: { app: mariadbDatabase() },
        env: ({ app }) => ({ DATABASE_URL: app.url }),
        check: ({ resources: { app }, output }) => sequelizeBlog(app, output),
      }),
    },
  },
  {
    readme: 'README.md',
    variants: {
      default: variant({
        resources: { app: postgresDatabase() },
        env: ({ app }) => ({ DATABASE_URL: app.url }),
        async check({ resources: { app }, output }) {
          // app.ts: the post on user 31341's shard, the comment with it, a month's ID range.
          const line = output.split('\n').find((l) => l.startsWith('{"postId"'))
          ensure(line !== undefined, 'app.ts printed no IDs')
          const ids = JSON.parse(line) as Record<string, string>
          ensurePlaced(
            [{ id: ids.postId }, { id: ids.commentId }],
            () => shardOfKey(31341n, 2000),
            'ID',
          )
          ensure(
            BigInt(ids.min!) < BigInt(ids.max!),
            `idRange gave min ${ids.min} >= max ${ids.max}`,
          )
          // leased.ts: the first free worker (0 is never leased), released at close with its mark.
          ensure(
            /shard: 1341/.test(output) && /worker: 1\b/.test(output),
            'leased.ts printed no ID of worker 1 on shard 1341',
          )
          const leases = await app.query(
            'SELECT worker, holder, token::text AS token, high_water_ms::text AS mark FROM shardflake.worker_leases WHERE token > 0',
          )
          ensureCount(leases, 1, 'granted leases')
          ensure(
            leases[0]!.worker === 1 && leases[0]!.holder === null,
            `worker 1 is not free again: ${JSON.stringify(leases[0])}`,
          )
          ensure(BigInt(String(leases[0]!.mark)) > 0n, 'the lease recorded no high-water mark')
        },
      }),
    },
  },
  {
    readme: 'packages/core/README.md',
    variants: {
      // The quick start (no server), then the shard-homes recipe on three PostgreSQL databases
      // standing for three servers.
      homes: variant({
        resources: { a: postgresDatabase(), b: postgresDatabase(), c: postgresDatabase() },
        env: ({ a, b, c }) => ({ SERVER_A_URL: a.url, SERVER_B_URL: b.url, SERVER_C_URL: c.url }),
        async check({ resources, output }) {
          ensure(/^1341 1341$/m.test(output), 'app.ts does not print 1341 1341')
          ensure(/shard: 1341/.test(output), 'the decomposed comment ID does not show shard 1341')
          await homesPlaced(resources)
          ensure(/^c hello from 31341$/m.test(output), 'homes.ts does not print c hello from 31341')
          const feed = output.split('\n').find((line) => line.startsWith("[ 'hello from"))
          ensure(
            feed !== undefined &&
              [7, 1000, 31341].every((author) => feed.includes(`'hello from ${author}'`)),
            'homes.ts does not print the three posts of the feed',
          )
          ensure(
            /^1 posts moved; writes waited \d+ ms$/m.test(output),
            'move.ts does not print 1 posts moved',
          )
          ensure(
            /^1 old copies deleted$/m.test(output),
            'move.ts does not print 1 old copies deleted',
          )
          await idsMoved(resources, output)
        },
      }),
    },
  },
  {
    readme: 'packages/postgres/README.md',
    variants: {
      default: variant({
        resources: { a: postgresDatabase(), b: postgresDatabase() },
        env: ({ a, b }) => ({ SERVER_A: a.url, SERVER_B: b.url }),
        async check({ resources: { a, b }, output }) {
          ensure(
            /\[ \{ shard: 45 \} \]/.test(output),
            'the PGlite part does not print [ { shard: 45 } ]',
          )
          const schemas = async (database: SqlDatabase) =>
            (
              await database.query(
                "SELECT count(*)::int AS n FROM pg_namespace WHERE nspname ~ '^shard_[0-9]+$'",
              )
            )[0]!.n
          ensure(
            (await schemas(a)) === 32 && (await schemas(b)) === 32,
            'each server does not hold its 32 shards',
          )
          const posts = await b.query('SELECT id::text AS id FROM shard_45.posts')
          ensureCount(posts, 1, 'posts on server B')
          ensurePlaced(posts, () => shardOfKey(31341n, 64), 'post')
          const onA = await a.query("SELECT to_regclass('shard_45.posts') AS t")
          ensure(onA[0]!.t === null, 'server A has a posts table of shard 45')
        },
      }),
    },
  },
  {
    readme: 'packages/mysql/README.md',
    variants: {
      default: variant({
        // A server of its own: the shard databases shard_0 .. shard_63 are server-wide names.
        resources: { server: mariadbServer() },
        env: ({ server }) => ({ MYSQL_URL: server.url }),
        async check({ resources: { server }, output }) {
          const printed = /^(-?\d+)n 1000$/m.exec(output)
          ensure(printed !== null, 'app.ts does not print an ID and 1000')
          ensurePlaced([{ id: printed[1] }], () => shardOfKey(31341n, 64), 'the printed ID')
          const shards = await server.query(
            "SELECT count(*) AS n FROM information_schema.schemata WHERE schema_name REGEXP '^shard_[0-9]+$'",
          )
          ensure(Number(shards[0]!.n) === 64, `expected 64 shard databases, found ${shards[0]!.n}`)
          const posts = await server.query('SELECT id, user_id FROM posts')
          ensureCount(posts, 1, 'posts')
          ensurePlaced(posts, (p) => shardOfKey(String(p.user_id), 64), 'post')
        },
      }),
    },
  },
  {
    readme: 'packages/redis/README.md',
    variants: {
      default: variant({
        // Two servers of its own, as the README's list shows; nothing shared is touched.
        resources: { first: redisServer(), second: redisServer() },
        env: ({ first, second }) => ({ REDIS_URLS: `${first.url},${second.url}` }),
        async check({ resources: { first, second }, output }) {
          const printed = /^(-?\d+)n 500 10 (\[[^\]]*\]) (\d+)$/m.exec(output)
          ensure(
            printed !== null,
            "app.ts does not print an ID, 500, 10, the servers and the ID's server",
          )
          ensurePlaced([{ id: printed[1] }], () => shardOfKey(31341n, 2000), 'the printed ID')
          // The failover strategy asks the first server while it answers.
          ensure(printed[3] === '0', `the first ID came from server ${printed[3]}, not the first`)
          ensure(
            (await first.command(['EXISTS', 'shardflake:shard:1341'])) === 1,
            'the first server keeps no state for shard 1341',
          )
          ensure(
            (await second.command(['EXISTS', 'shardflake:shard:1341'])) === 0,
            'the second server was used while the first answered',
          )
        },
      }),
    },
  },
  {
    readme: 'packages/cli/README.md',
    variants: {
      default: variant({
        resources: { app: postgresDatabase() },
        env: ({ app }) => ({ DATABASE_URL: app.url }),
        async check({ resources: { app }, output }) {
          ensure(/^shard\s+45$/m.test(output), 'decode does not print shard 45')
          ensure(
            /^capacity\s+1024 IDs per ms per shard/m.test(output),
            'layout does not print its capacity',
          )
          const schemas = await app.query(
            "SELECT count(*)::int AS n FROM pg_namespace WHERE nspname ~ '^shard_[0-9]+$'",
          )
          ensure(schemas[0]?.n === 64, `expected 64 shard schemas, found ${schemas[0]?.n}`)
          const drawn = await app.query('SELECT shard_45.next_id()::text AS id')
          ensurePlaced(drawn, () => 45, 'a next_id() of shard_45')
        },
      }),
    },
  },
]
