/**
 * What users install: the build passes publint and "are the types wrong" (ESM-only profile, as
 * errors), and the built entry loads in a fresh Node process, through `import` and, for CommonJS
 * applications on Node >= 22.12, `require()` of ES modules, with the same exports.
 */
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { promisify, stripVTControlCharacters } from 'node:util'
import { beforeAll, expect, it } from 'vitest'

const run = promisify(execFile)
const root = join(import.meta.dirname, '..')
const node = async (args: string[]) =>
  (await run(process.execPath, args, { cwd: root, env: { ...process.env, NODE_OPTIONS: '' } }))
    .stdout

let build = ''
beforeAll(async () => {
  // The built core this package loads at runtime, then this package.
  if (!existsSync(join(root, '..', 'core', 'dist', 'index.mjs'))) {
    await run('pnpm', ['--filter', '@shardflake/core', 'build'], { cwd: root, timeout: 120_000 })
  }
  const { stdout, stderr } = await run('npx', ['tsdown'], { cwd: root, timeout: 180_000 })
  // Without colours: tsdown colours its report when CI is set.
  build = stripVTControlCharacters(stdout + stderr)
}, 240_000)

it('builds clean: publint and attw (esm-only) find nothing', () => {
  expect(build).toMatch(/\[attw\] No problems found/)
  expect(build).toMatch(/\[publint\] No issues found/)
})

it('loads the built entry with import and with require(), the same exports', async () => {
  const imported = JSON.parse(
    await node([
      '--input-type=module',
      '-e',
      `console.log(JSON.stringify(Object.keys(await import('@shardflake/kysely')).sort()))`,
    ]),
  )
  const required = JSON.parse(
    await node([
      '-e',
      `console.log(JSON.stringify(Object.keys(require('@shardflake/kysely')).sort()))`,
    ]),
  )
  expect(imported).toEqual([
    'PendingId',
    'ShardedIdsPlugin',
    'ShardedKysely',
    'shardedIds',
    'shardedKysely',
    'trustSuppliedIds',
  ])
  expect(required).toEqual(imported)
})
