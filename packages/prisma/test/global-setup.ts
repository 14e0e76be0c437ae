import { execFile } from 'node:child_process'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const root = fileURLToPath(new URL('..', import.meta.url))
const run = promisify(execFile)

/** The `provider` of the shardflake generator, running from this package's source. */
export const generatorFromSource = [
  'node',
  // core's sources use TypeScript parameter properties, which type stripping alone refuses
  '--experimental-transform-types',
  '--no-warnings=ExperimentalWarning',
  '--conditions=@shardflake/source',
  `--import=${root}test/support/ts-hooks.mjs`,
  `${root}src/generator-bin.ts`,
].join(' ')

/**
 * Writes `schema` to `generated/<folder>/schema.prisma` and runs `prisma generate` on it. No
 * engine is downloaded: `generate` does not use the schema engine, so any path will do for
 * `PRISMA_SCHEMA_ENGINE_BINARY`.
 * @returns the folder
 */
export async function prismaGenerate(folder: string, schema: string): Promise<string> {
  const dir = `${root}generated/${folder}`
  await mkdir(dir, { recursive: true })
  await writeFile(`${dir}/schema.prisma`, schema)
  await run(`${root}node_modules/.bin/prisma`, ['generate', '--schema', `${dir}/schema.prisma`], {
    cwd: dir,
    env: {
      ...process.env,
      PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? '/bin/false',
      CHECKPOINT_DISABLE: '1',
      PRISMA_HIDE_UPDATE_MESSAGE: '1',
    },
  })
  return dir
}

/** The blog schema of the tests for a database provider. */
export async function blogSchema(provider: 'postgresql' | 'mysql'): Promise<string> {
  return (await readFile(`${root}test/fixtures/blog.prisma`, 'utf8'))
    .replace('provider = "postgresql"', `provider = "${provider}"`)
    .replace('SHARDFLAKE_GENERATOR', generatorFromSource)
}

/**
 * Generates the blog's Prisma client and shardflake metadata for PostgreSQL (`generated/pg`)
 * and MariaDB (`generated/mysql`), in the gitignored `generated/` folder, so a clean clone works.
 */
export default async function setup(): Promise<void> {
  await Promise.all([
    prismaGenerate('pg', await blogSchema('postgresql')),
    prismaGenerate('mysql', await blogSchema('mysql')),
  ])
}
