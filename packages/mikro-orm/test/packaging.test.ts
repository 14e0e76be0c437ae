/**
 * The published entries, loaded as an application loads them (built package, a fresh Node
 * process): CommonJS `require` next to `import`, and what `/legacy` needs at runtime.
 */
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { beforeAll, expect, it } from 'vitest'

const run = promisify(execFile)
const root = join(import.meta.dirname, '..')
const node = async (args: string[]) =>
  (await run(process.execPath, args, { cwd: root, env: { ...process.env, NODE_OPTIONS: '' } }))
    .stdout

beforeAll(async () => {
  // The built core this package loads at runtime, then this package.
  if (!existsSync(join(root, '..', 'core', 'dist', 'index.cjs'))) {
    await run('pnpm', ['--filter', '@shardflake/core', 'build'], { cwd: root, timeout: 120_000 })
  }
  await run('npx', ['tsdown', '--no-publint', '--no-attw'], { cwd: root, timeout: 120_000 })
}, 240_000)

it('loads every entry with require() (CommonJS) and with import', async () => {
  const script = `
    const entries = ['', '/legacy', '/es', '/migrations', '/v6']
    const out = {}
    for (const entry of entries) out[entry || '.'] = Object.keys(require('@shardflake/mikro-orm' + entry)).sort()
    console.log(JSON.stringify(out))`
  const required = JSON.parse(await node(['-e', script]))
  const imported = JSON.parse(
    await node([
      '--input-type=module',
      '-e',
      `const out = {}
       for (const entry of ['', '/legacy', '/es', '/migrations', '/v6'])
         out[entry || '.'] = Object.keys(await import('@shardflake/mikro-orm' + entry)).sort()
       console.log(JSON.stringify(out))`,
    ]),
  )
  expect(required).toEqual(imported)
  expect(required['.']).toEqual(
    expect.arrayContaining(['ShardKeyChangedError', 'assignShardedIds', 'shardedId', 'shardedIds']),
  )
  expect(required['/legacy']).toEqual(['ShardedId'])
  expect(required['/migrations']).toEqual(['ShardMigration', 'shardMigration'])
})

it('/legacy loads reflect-metadata through @mikro-orm/decorators/legacy (so it must be installed); / and /es do not', async () => {
  const probe = (entry: string) =>
    node([
      '--input-type=module',
      '-e',
      `await import('@shardflake/mikro-orm${entry}'); console.log(typeof Reflect.getMetadata)`,
    ])
  expect((await probe('')).trim()).toBe('undefined')
  expect((await probe('/es')).trim()).toBe('undefined')
  expect((await probe('/legacy')).trim()).toBe('function')
})
