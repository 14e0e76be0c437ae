/**
 * The README's quick start, read from the README itself (the block marked
 * `<!-- quick-start: src/app.ts -->`), run with Node as a reader runs it against an empty
 * PostgreSQL and an empty MariaDB database, on the built packages; the rows it leaves are checked
 * through raw SQL.
 */
import { execFile } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { type Dialect, expectedShard, freshDatabase } from '@shardflake/conformance'
import { defineSharding, instagram } from '@shardflake/core'
import { afterAll, beforeAll, expect, it } from 'vitest'

const run = promisify(execFile)
const root = join(import.meta.dirname, '..')
const readme = readFileSync(join(root, 'README.md'), 'utf8')
const app = /<!-- quick-start: src\/app\.ts -->\n```ts\n([\s\S]*?)```/.exec(readme)?.[1]
let directory: string

beforeAll(async () => {
  if (!existsSync(join(root, 'dist', 'index.mjs'))) {
    await run('npx', ['tsdown', '--no-publint', '--no-attw'], { cwd: root, timeout: 120_000 })
  }
  // A folder outside the repository whose node_modules link to the packages the quick start imports.
  directory = await mkdtemp(join(tmpdir(), 'sf-sequelize-readme-'))
  await writeFile(join(directory, 'package.json'), '{ "type": "module" }\n')
  const links: Record<string, string> = {
    '@shardflake/sequelize': root,
    '@shardflake/core': join(root, 'node_modules', '@shardflake', 'core'),
    sequelize: join(root, 'node_modules', 'sequelize'),
    pg: join(root, 'node_modules', 'pg'),
    mysql2: join(root, 'node_modules', 'mysql2'),
  }
  for (const [name, target] of Object.entries(links)) {
    const link = join(directory, 'node_modules', name)
    await mkdir(dirname(link), { recursive: true })
    await symlink(target, link)
  }
  await mkdir(join(directory, 'src'))
  await writeFile(join(directory, 'src', 'app.ts'), app ?? '')
}, 180_000)

afterAll(async () => {
  if (directory) await rm(directory, { recursive: true, force: true })
})

for (const dialect of ['postgres', 'mysql'] as const satisfies Dialect[]) {
  it(`runs the quick start on ${dialect === 'postgres' ? 'PostgreSQL' : 'MariaDB'}: author, post and comment on the shard of the email`, async () => {
    expect(app).toContain('shardedIds(sequelize, { source })')
    const raw = await freshDatabase(dialect, `sf_sqlz_readme_${dialect.slice(0, 2)}`)
    try {
      const { stdout } = await run(process.execPath, ['src/app.ts'], {
        cwd: directory,
        env: { ...process.env, NODE_OPTIONS: '', DATABASE_URL: raw.url },
        timeout: 120_000,
      })
      const shard = expectedShard('ada@example.com', 64)
      expect(stdout.trim()).toBe(`[ ${shard}, ${shard}, ${shard} ]`)
      const q = (name: string) => (dialect === 'postgres' ? `"${name}"` : name)
      const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
      const rows = await raw.query(
        `SELECT u.id AS author, p.id AS post, c.id AS comment FROM ${q('Users')} u
         JOIN ${q('Posts')} p ON p.${q('authorId')} = u.id JOIN ${q('Comments')} c ON c.${q('postId')} = p.id
         WHERE u.email = 'ada@example.com'`,
      )
      expect(rows).toHaveLength(1)
      for (const id of Object.values(rows[0]!)) expect(sharding.shardOfId(String(id))).toBe(shard)
    } finally {
      await raw.close()
    }
  }, 180_000)
}
