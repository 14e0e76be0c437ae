/**
 * Every TypeScript snippet a user reads must compile against the packages as they are: each
 * ```ts block of every README (root, packages, examples) and each ```ts block of a JSDoc
 * `@example` in every package's sources. A snippet becomes its own module next to the package it
 * documents (so it resolves that package's dependencies) and goes through the type checker with
 * that package's compiler settings.
 *
 * README snippets are strict: every name they use must be imported or declared, in the block
 * itself or in the block it continues (a block preceded by `<!-- continues -->` is compiled
 * together with the one before it, as a reader reads them). JSDoc examples may use names the
 * surrounding documentation introduces (`pool`, `source`), so "cannot find name" and
 * implicit-any diagnostics are tolerated there; wrong imports, wrong option names and wrong types
 * are not.
 *
 * The Prisma README's ```typescript blocks import the client `prisma generate` writes; the Prisma
 * example generates it and type-checks them there (examples/prisma-postgres/test/bench.test.ts).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const root = join(import.meta.dirname, '..')

/** Diagnostics tolerated in JSDoc examples: names from the surrounding prose, implicit any. */
const TOLERATED_IN_EXAMPLES = new Set([2304, 2552, 7005, 7006, 7031, 7034, 2454, 18004])

interface Snippet {
  /** Where it came from, for messages: `packages/core/README.md #2`. */
  readonly origin: string
  readonly code: string
  readonly strict: boolean
  /** Settings over the package's own (see {@link EXAMPLE_SETTINGS}). */
  readonly settings?: ts.CompilerOptions
}

/**
 * Compiler settings that differ for the examples of one source file: the standard-decorator entry
 * of the MikroORM adapter is written for TypeScript's standard decorators.
 */
const EXAMPLE_SETTINGS: Record<string, ts.CompilerOptions> = {
  'packages/mikro-orm/src/es.ts': { experimentalDecorators: false, emitDecoratorMetadata: false },
}

/**
 * Sources whose examples are written for another major of their ORM than the one installed here
 * (the MikroORM 6 entry): they cannot compile against this workspace, and are run by the example
 * that installs that major instead.
 */
const OTHER_MAJOR = new Set(['packages/mikro-orm/src/v6.ts'])

function readmeSnippets(file: string): string[] {
  if (!existsSync(file)) return []
  const blocks: string[] = []
  for (const match of readFileSync(file, 'utf8').matchAll(
    /(<!-- continues -->\s*)?```ts\n([\s\S]*?)```/g,
  )) {
    if (match[1] && blocks.length > 0) blocks[blocks.length - 1] += `\n${match[2]!}`
    else blocks.push(match[2]!)
  }
  return blocks
}

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return []
  return (
    readdirSync(dir, { recursive: true, encoding: 'utf8' })
      .filter((name) => name.endsWith('.ts') && !name.endsWith('.d.ts'))
      // Generated code (a Prisma client) documents itself for its own generator, not for users.
      .filter((name) => !name.split('/').includes('generated'))
      .map((name) => join(dir, name))
  )
}

function exampleSnippets(file: string): string[] {
  const text = readFileSync(file, 'utf8')
  const snippets: string[] = []
  for (const comment of text.matchAll(/\/\*\*([\s\S]*?)\*\//g)) {
    const lines = comment[1]!.split('\n').map((line) => line.replace(/^\s*\* ?/, ''))
    const body = lines.join('\n')
    for (const block of body.matchAll(/@example[^\n]*\n\s*```ts\n([\s\S]*?)```/g)) {
      snippets.push(block[1]!)
    }
  }
  return snippets
}

/** Where each group of snippets compiles: a directory with a package.json and its settings. */
interface Home {
  readonly dir: string
  readonly snippets: Snippet[]
}

/**
 * READMEs with a recipe that uses sibling packages (core's shard homes on PostgreSQL servers):
 * their blocks compile with the root README's, where those packages are installed. Their own
 * package cannot depend on them (the siblings depend on it).
 */
const README_WITH_SIBLINGS = new Set(['packages/core'])

function homes(): Home[] {
  const result: Home[] = []
  const withSiblings: Snippet[] = []
  for (const group of ['packages', 'examples']) {
    for (const name of readdirSync(join(root, group))) {
      const dir = join(root, group, name)
      if (!existsSync(join(dir, 'package.json'))) continue
      const readme: Snippet[] = readmeSnippets(join(dir, 'README.md')).map((code, i) => ({
        origin: `${group}/${name}/README.md #${i + 1}`,
        code,
        strict: true,
      }))
      const elsewhere = README_WITH_SIBLINGS.has(`${group}/${name}`)
      if (elsewhere) withSiblings.push(...readme)
      const snippets: Snippet[] = elsewhere ? [] : readme
      for (const file of sourceFiles(join(dir, 'src'))) {
        const path = relative(root, file)
        if (OTHER_MAJOR.has(path)) continue
        const settings = EXAMPLE_SETTINGS[path]
        exampleSnippets(file).forEach((code, i) => {
          snippets.push({
            origin: `${path} @example #${i + 1}`,
            code,
            strict: false,
            ...(settings ? { settings } : {}),
          })
        })
      }
      result.push({ dir, snippets })
    }
  }
  result.push({
    dir: import.meta.dirname,
    snippets: [
      ...readmeSnippets(join(root, 'README.md')).map((code, i) => ({
        origin: `README.md #${i + 1}`,
        code,
        strict: true,
      })),
      ...withSiblings,
    ],
  })
  return result
}

function compile(home: Home): string[] {
  const out = join(home.dir, '.snippets')
  rmSync(out, { recursive: true, force: true })
  mkdirSync(out, { recursive: true })
  const problems: string[] = []
  const groups = new Map<string, Snippet[]>()
  for (const snippet of home.snippets) {
    const key = JSON.stringify(snippet.settings ?? {})
    groups.set(key, [...(groups.get(key) ?? []), snippet])
  }
  let n = 0
  for (const [key, snippets] of groups) {
    const files = snippets.map((snippet) => {
      const file = join(out, `snippet-${++n}.ts`)
      writeFileSync(file, `${snippet.code}\nexport {}\n`)
      return file
    })
    problems.push(...check(home, snippets, files, JSON.parse(key) as ts.CompilerOptions))
  }
  rmSync(out, { recursive: true, force: true })
  return problems
}

function check(
  home: Home,
  snippets: readonly Snippet[],
  files: readonly string[],
  settings: ts.CompilerOptions,
): string[] {
  const tsconfig = existsSync(join(home.dir, 'tsconfig.json'))
    ? join(home.dir, 'tsconfig.json')
    : join(root, 'tsconfig.base.json')
  const config = ts.readConfigFile(tsconfig, ts.sys.readFile)
  const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, home.dir)
  const program = ts.createProgram(files, {
    ...options,
    ...settings,
    noEmit: true,
    noUnusedLocals: false,
    noUnusedParameters: false,
  })
  const problems: string[] = []
  for (const diagnostic of ts.getPreEmitDiagnostics(program)) {
    const index = diagnostic.file ? files.indexOf(diagnostic.file.fileName) : -1
    const snippet = snippets[index]
    if (snippet && !snippet.strict && TOLERATED_IN_EXAMPLES.has(diagnostic.code)) continue
    const where = snippet ? snippet.origin : (diagnostic.file?.fileName ?? 'settings')
    problems.push(`${where}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')}`)
  }
  return problems
}

describe('snippets users read', () => {
  const all = homes()

  it('finds snippets in the READMEs and in the JSDoc examples', () => {
    const count = all.reduce((sum, home) => sum + home.snippets.length, 0)
    expect(count).toBeGreaterThan(20)
    expect(all.at(-1)!.snippets.length).toBeGreaterThanOrEqual(3)
  })

  for (const home of all.filter((h) => h.snippets.length > 0)) {
    it(`compiles every snippet of ${relative(root, home.dir) || '.'} (${home.snippets.length})`, () => {
      expect(compile(home)).toEqual([])
    })
  }

  it('runs only commands the root package defines', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8')
    const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>
    }
    for (const command of readme.matchAll(/^pnpm ([a-z:]+)/gm)) {
      if (['install', 'exec', 'add'].includes(command[1]!)) continue
      expect(Object.keys(manifest.scripts)).toContain(command[1])
    }
  })
})
