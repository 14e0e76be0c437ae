/**
 * Every README quick start the runner runs: for each README, its variants (the servers it needs,
 * the environment the README tells the reader to set) and the check of what it left behind,
 * through raw SQL. The steps themselves are read from the README's markers (see `blocks.ts`).
 *
 * To add a README (a new adapter): mark its blocks, add an entry here with a check that decodes
 * the IDs its first inserts stored, and run `pnpm test:readmes -t <package>`.
 */
import { ensure, ensureCount, ensurePlaced, shardOfId, shardOfKey } from './checks.ts'
import { mariadbDatabase, postgresDatabase, type SqlDatabase } from './resources.ts'
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

/** What the README tells an offline reader to set for `prisma generate`. */
const PRISMA_OFFLINE = { PRISMA_SCHEMA_ENGINE_BINARY: '/bin/false' }

export const QUICK_STARTS: readonly QuickStart[] = [
  {
    readme: 'packages/typeorm/README.md',
    variants: {
      default: variant({
        resources: { app: postgresDatabase() },
        env: ({ app }) => ({ DATABASE_URL: app.url }),
        async check({ resources: { app }, output }) {
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
      default: variant({
        resources: { app: postgresDatabase() },
        env: ({ app }) => ({ DATABASE_URL: app.url }),
        async check({ resources: { app }, output }) {
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
      default: variant({
        resources: {},
        env: () => ({}),
        async check({ output }) {
          ensure(/^1341 1341$/m.test(output), 'app.ts does not print 1341 1341')
          ensure(/shard: 1341/.test(output), 'the decomposed comment ID does not show shard 1341')
        },
      }),
    },
  },
]
