/**
 * The published entry, loaded as an application loads it (built package, a fresh Node process):
 * CommonJS `require` next to `import`, and attributes made by one copy recognized by the other.
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

it('exports the same names to require() (CommonJS) and import', async () => {
  const required = JSON.parse(
    await node([
      '-e',
      `console.log(JSON.stringify(Object.keys(require('@shardflake/sequelize')).sort()))`,
    ]),
  )
  const imported = JSON.parse(
    await node([
      '--input-type=module',
      '-e',
      `console.log(JSON.stringify(Object.keys(await import('@shardflake/sequelize')).sort()))`,
    ]),
  )
  expect(required).toEqual(imported)
  expect(required).toEqual([
    'ShardedIds',
    'ShardedSequelize',
    'shardedId',
    'shardedIds',
    'shardedSequelize',
    'trustSuppliedIds',
  ])
})

it('recognizes a shardedId() attribute made by the other module system', async () => {
  const script = `
    const { createRequire } = await import('node:module')
    const require = createRequire(process.cwd() + '/')
    const { shardedId } = await import('@shardflake/sequelize')
    const { shardedIds } = require('@shardflake/sequelize')
    const { defineSharding, InProcessSource, instagram } = require('@shardflake/core')
    const { Sequelize, DataTypes } = require('sequelize')
    const sequelize = new Sequelize('postgres://nobody@127.0.0.1:1/none', { logging: false })
    sequelize.define('Audit', { id: shardedId({ shard: 99 }), body: DataTypes.STRING })
    const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
    const source = new InProcessSource({ sharding, shards: 'all' })
    try { shardedIds(sequelize, { source }); console.log('accepted') }
    catch (error) { console.log(error.code) }
    finally { source.close() }`
  expect((await node(['--input-type=module', '-e', script])).trim()).toBe('SHARD_OUT_OF_RANGE')
})
