import { execFile } from 'node:child_process'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const root = fileURLToPath(new URL('..', import.meta.url))
const run = promisify(execFile)

/** The Prisma schema of the blog for each database the tests use. */
export const schemas = { pg: 'postgresql', mysql: 'mysql' } as const

/**
 * Runs `prisma generate` for the blog schema, once per database, into `generated/` (gitignored):
 * the Prisma client and the shardflake generator's metadata, the generator running from source.
 * No engine is downloaded: `generate` does not use the schema engine.
 */
export default async function setup(): Promise<void> {
  const template = await readFile(`${root}test/fixtures/blog.prisma`, 'utf8')
  const generator = [
    'node',
    '--conditions=@shardflake/source',
    `--import=${root}test/support/ts-hooks.mjs`,
    `${root}src/generator-bin.ts`,
  ].join(' ')
  await Promise.all(
    Object.entries(schemas).map(async ([folder, provider]) => {
      const dir = `${root}generated/${folder}`
      await mkdir(dir, { recursive: true })
      await writeFile(
        `${dir}/schema.prisma`,
        template
          .replace('provider = "postgresql"', `provider = "${provider}"`)
          .replace('SHARDFLAKE_GENERATOR', generator),
      )
      await run(
        `${root}node_modules/.bin/prisma`,
        ['generate', '--schema', `${dir}/schema.prisma`],
        {
          cwd: dir,
          env: {
            ...process.env,
            PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? '/bin/false',
            CHECKPOINT_DISABLE: '1',
            PRISMA_HIDE_UPDATE_MESSAGE: '1',
          },
        },
      )
    }),
  )
}
