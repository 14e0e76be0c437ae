/**
 * The example runs as users run it (`prisma generate`, then `node src/bench.ts`, against the
 * built packages) in databases of its own, and the rows it writes are checked with raw SQL:
 * posts on their user's shard, comments on their post's, every row counted. Timings are
 * printed by the example, never asserted.
 */
import { execFile } from 'node:child_process'
import { readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { defineSharding, instagram } from '@shardflake/core'
import { filesOf, quickStartSteps } from '@shardflake/readme-check/blocks'
import pg from 'pg'
import ts from 'typescript'
import { afterAll, beforeAll, expect, it } from 'vitest'

const run = promisify(execFile)
const root = join(import.meta.dirname, '..')
const baseUrl = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
// per run, so two runs on one server never meet
const prefix = `sf_prisma_example_test_${process.pid}`
/** The example's sharding (src/bench.ts): decoding IDs needs only the layout. */
const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
const databases = ['auto', 'inproc', 'prefetch', 'nextid', 'manual', 'text']

beforeAll(async () => {
  await run(
    join(root, 'node_modules', '.bin', 'prisma'),
    ['generate', '--schema', 'prisma/schema.prisma'],
    {
      cwd: root,
      env: {
        ...process.env,
        // as `pnpm generate` and `npx prisma generate` do: the generator's bin is on the PATH
        PATH: `${join(root, 'node_modules', '.bin')}:${process.env.PATH ?? ''}`,
        PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? '/bin/false',
        CHECKPOINT_DISABLE: '1',
      },
    },
  )
}, 120_000)

afterAll(async () => {
  const admin = new pg.Client({ connectionString: baseUrl })
  await admin.connect()
  try {
    for (const database of databases)
      await admin.query(`DROP DATABASE IF EXISTS ${prefix}_${database}`)
  } finally {
    await admin.end()
  }
})

async function query<T>(database: string, sql: string): Promise<T[]> {
  const url = new URL(baseUrl)
  url.pathname = `/${prefix}_${database}`
  const client = new pg.Client({ connectionString: url.toString() })
  await client.connect()
  try {
    return (await client.query(sql)).rows as T[]
  } finally {
    await client.end()
  }
}

it("writes every post on its user's shard and every comment on its post's, decoding both IDs, in every mode", async () => {
  const { stdout } = await run(
    process.execPath,
    [
      join(root, 'src', 'bench.ts'),
      '--json',
      '--rounds',
      '1',
      '--single',
      '3',
      '--users',
      '4',
      '--prefix',
      prefix,
    ],
    { cwd: root, env: { ...process.env, NODE_OPTIONS: '' }, timeout: 120_000 },
  )
  const { results } = JSON.parse(stdout) as {
    results: {
      mode: string
      single: { ratio: number }
      createMany: { ratio: number }
      createManyWide: { ratio: number }
    }[]
  }
  expect(results.map((r) => r.mode)).toEqual([
    'autoincrement',
    'in-process',
    'next_id() + prefetch',
    'next_id()',
    'app-assigned, no extension',
    'app-assigned as strings, no extension',
  ])
  expect(results[0]!.single.ratio).toBe(1)
  expect(results[0]!.createManyWide.ratio).toBe(1)

  for (const database of ['inproc', 'prefetch', 'nextid', 'manual', 'text']) {
    const posts = await query<{ id: string; user_id: string }>(
      database,
      'SELECT id::text, user_id::text FROM posts',
    )
    const comments = await query<{ id: string; post_id: string }>(
      database,
      'SELECT id::text, post_id::text FROM comments',
    )
    // one round: 3 single posts + 1000 from createMany; the same for comments
    expect(posts).toHaveLength(1003)
    expect(comments).toHaveLength(1003)
    expect(await query(database, 'SELECT id FROM users')).toHaveLength(4)
    const users = await query<{ id: string; email: string }>(
      database,
      'SELECT id::text, email FROM users',
    )
    // users spread by the hash of their email: more than one shard
    for (const user of users) {
      expect(sharding.shardOfId(user.id)).toBe(sharding.shardForKey(user.email))
    }
    expect(new Set(users.map((user) => sharding.shardOfId(user.id))).size).toBeGreaterThan(1)
    for (const post of posts) {
      expect(sharding.shardOfId(post.id)).toBe(sharding.shardOfId(post.user_id))
    }
    for (const comment of comments) {
      expect(sharding.shardOfId(comment.id)).toBe(sharding.shardOfId(comment.post_id))
    }
    const widePosts = await query<{ id: string; user_id: string }>(
      database,
      'SELECT id::text, user_id::text FROM wide_posts',
    )
    expect(widePosts).toHaveLength(1000)
    for (const post of widePosts) {
      expect(sharding.shardOfId(post.id)).toBe(sharding.shardOfId(post.user_id))
    }
  }
  const [auto] = await query<{ posts: number; comments: number; wide: number }>(
    'auto',
    'SELECT (SELECT count(*) FROM auto_posts)::int AS posts, (SELECT count(*) FROM auto_comments)::int AS comments, (SELECT count(*) FROM auto_wide_posts)::int AS wide',
  )
  expect(auto).toEqual({ posts: 1003, comments: 1003, wide: 1000 })
}, 180_000)

it("runs the quick start of the package README, which is this example's src/quick-start.ts", async () => {
  // The README's PostgreSQL variant of the file, as its quick-start markers assemble it.
  const code = await readFile(join(root, 'src', 'quick-start.ts'), 'utf8')
  const readme = await readFile(join(root, '..', '..', 'packages', 'prisma', 'README.md'), 'utf8')
  expect(filesOf(quickStartSteps(readme), 'postgres').get('src/quick-start.ts')).toBe(code)
  const url = new URL(baseUrl)
  url.pathname = `/${prefix}_inproc`
  const { stdout } = await run(process.execPath, [join(root, 'src', 'quick-start.ts')], {
    cwd: root,
    env: { ...process.env, NODE_OPTIONS: '', DATABASE_URL: url.toString() },
    timeout: 60_000,
  })
  const [user, post, comment] = JSON.parse(stdout.replaceAll(' ', '')) as number[]
  expect(user).toBe(sharding.shardForKey('ada@example.com'))
  expect([post, comment]).toEqual([user, user])
  const [stored] = await query<{ id: string; email: string }>(
    'inproc',
    "SELECT id::text, email FROM users WHERE email = 'ada@example.com'",
  )
  expect(sharding.shardOfId(stored!.id)).toBe(user)
}, 120_000)

it('type-checks every TypeScript block of the package README against the generated client', async () => {
  // Blocks go into src/, next to the generated client the quick start imports. The quick start is
  // checked as its PostgreSQL variant assembles it (this example has adapter-pg; the README
  // runner checks the MariaDB one); any other block after `<!-- continues -->` is checked
  // together with the one before it, as a reader reads them.
  const readme = await readFile(join(root, '..', '..', 'packages', 'prisma', 'README.md'), 'utf8')
  const blocks = [filesOf(quickStartSteps(readme), 'postgres').get('src/quick-start.ts')!]
  for (const match of readme.matchAll(/((?:<!--[^>]*-->\s*)*)```typescript\n([\s\S]*?)```/g)) {
    if (match[1]!.includes('quick-start')) continue
    if (match[1]!.includes('<!-- continues -->')) blocks[blocks.length - 1] += `\n${match[2]!}`
    else blocks.push(match[2]!)
  }
  expect(blocks.join('\n')).toContain('$shardedIds.assign(')
  const files = blocks.map((_, i) => join(root, 'src', `.readme-block-${process.pid}-${i}.ts`))
  try {
    await Promise.all(files.map((file, i) => writeFile(file, blocks[i]!)))
    const program = ts.createProgram(files, {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2023,
      strict: true,
      noEmit: true,
      allowImportingTsExtensions: true,
      skipLibCheck: true,
      types: ['node'],
    })
    const problems = ts.getPreEmitDiagnostics(program).map((diagnostic) => {
      const where = diagnostic.file?.fileName.replace(root, '') ?? ''
      return `${where}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')}`
    })
    expect(problems).toEqual([])
  } finally {
    await Promise.all(files.map((file) => rm(file, { force: true })))
  }
}, 120_000)
