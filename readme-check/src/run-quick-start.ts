/**
 * Runs one variant of a README's quick start in a scratch app, as a reader would, then checks
 * what it left in the databases.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { type Step, stepsOf } from './blocks.ts'
import type { Resource, ResourceSpec, SqlDatabase } from './resources.ts'
import { createApp, repositoryRoot, StepFailedError } from './scratch-app.ts'

/** The resources a variant asked for, made. */
export type Made<S> = { [K in keyof S]: S[K] extends ResourceSpec<infer R> ? R : never }

/** What a check sees after the quick start ran. */
export interface Outcome<S> {
  readonly resources: Made<S>
  /** Everything the quick start's commands printed on stdout, in order. */
  readonly output: string
  /** The app's folder. */
  readonly directory: string
}

/** One way to run a README's quick start (a database, a driver adapter). */
export interface VariantSpec<S extends Record<string, ResourceSpec<Resource>>> {
  /** Made fresh for every run (databases, servers). */
  readonly resources: S
  /**
   * The environment the README tells the reader to set (`DATABASE_URL`, ...). Every name must
   * appear in the README: the runner sets nothing a reader would not know to set. SQL steps run
   * on the database whose URL is `DATABASE_URL`, or on the only database of the variant.
   */
  env(resources: Made<S>): Record<string, string>
  /** Reads the outcome through raw SQL (or the output) and throws when it is not what the README says. */
  check(outcome: Outcome<S>): Promise<void>
  /** The longest one command may run. @default 180_000 */
  readonly stepTimeoutMs?: number
}

/** A variant with its types erased, ready to run. */
export interface Variant {
  run(
    readme: string,
    steps: readonly Step[],
    variant: string,
    tarballs: ReadonlyMap<string, string>,
  ): Promise<void>
}

/** Declares a variant; see {@link VariantSpec}. */
export function variant<S extends Record<string, ResourceSpec<Resource>>>(
  spec: VariantSpec<S>,
): Variant {
  return {
    async run(readme, steps, name, tarballs) {
      const made: Partial<Made<S>> = {}
      const opened: Resource[] = []
      const slug = `${
        readme
          .replace(/(^|\/)README\.md$/, '')
          .replace(/^packages\/|^examples\//, '')
          .replace(/[^a-z0-9]+/gi, '_') || 'root'
      }_${name}`
      try {
        for (const key of Object.keys(spec.resources) as (keyof S & string)[]) {
          const resource = await spec.resources[key]!.create(
            `sfrd_${slug}_${key}`.toLowerCase().slice(0, 40),
          )
          opened.push(resource)
          made[key] = resource as Made<S>[typeof key]
        }
        const resources = made as Made<S>
        const env = spec.env(resources)
        const text = readFileSync(join(repositoryRoot, readme), 'utf8')
        for (const key of Object.keys(env)) {
          if (!text.includes(key)) {
            throw new Error(
              `${readme} (${name}): the runner sets ${key}, which the README never mentions: a reader would not know to set it.`,
            )
          }
        }
        const databases = opened.filter(
          (resource): resource is SqlDatabase => resource.kind !== 'redis',
        )
        const sqlTarget =
          databases.find((database) => database.url === env.DATABASE_URL) ??
          (databases.length === 1 ? databases[0] : undefined)
        const app = await createApp(slug, tarballs)
        let output = ''
        try {
          for (const step of stepsOf(steps, name)) {
            const where = `${readme}:${step.line} (${name}, ${step.kind}${step.file ? ` ${step.file}` : ''})`
            try {
              if (step.kind === 'file') await app.write(step.file!, step.code)
              else if (step.kind === 'run')
                output += await app.shell(step.code, env, spec.stepTimeoutMs ?? 180_000)
              else {
                if (!sqlTarget)
                  throw new Error('no database to run the SQL on: name one DATABASE_URL')
                await sqlTarget.script(step.code)
              }
            } catch (error) {
              throw new StepFailedError(
                `${where} failed:\n${indent(step.code)}\n${error instanceof Error ? error.message : String(error)}`,
                { cause: error },
              )
            }
          }
          try {
            await spec.check({ resources, output, directory: app.directory })
          } catch (error) {
            throw new Error(
              `${readme} (${name}) ran, but its outcome is wrong: ${error instanceof Error ? error.message : String(error)}\n--- output\n${output}`,
              { cause: error },
            )
          }
        } finally {
          if (process.env.READMES_KEEP) console.log(`kept ${app.directory}`)
          else await app.remove()
        }
      } finally {
        for (const resource of opened.reverse()) await resource.close().catch(() => undefined)
      }
    },
  }
}

function indent(code: string): string {
  return code
    .trimEnd()
    .split('\n')
    .map((line) => `  | ${line}`)
    .join('\n')
}
