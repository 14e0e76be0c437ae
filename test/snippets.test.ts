/**
 * Every TypeScript snippet a user reads must compile against the packages as they are: each
 * ```ts block of every README (root, packages, examples) and each ```ts block of a JSDoc
 * `@example` in every package's sources. A snippet becomes its own module next to the package it
 * documents (so it resolves that package's dependencies) and goes through the type checker with
 * that package's compiler settings.
 *
 * README snippets are strict: every name they use must be imported or declared. JSDoc examples
 * may use names the surrounding documentation introduces (`pool`, `source`), so "cannot find
 * name" and implicit-any diagnostics are tolerated there; wrong imports, wrong option names and
 * wrong types are not.
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
}

function readmeSnippets(file: string): string[] {
  if (!existsSync(file)) return []
  return [...readFileSync(file, 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!)
}

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return []
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts') && !name.endsWith('.d.ts'))
    .map((name) => join(dir, name))
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

function homes(): Home[] {
  const result: Home[] = []
  for (const group of ['packages', 'examples']) {
    for (const name of readdirSync(join(root, group))) {
      const dir = join(root, group, name)
      if (!existsSync(join(dir, 'package.json'))) continue
      const snippets: Snippet[] = readmeSnippets(join(dir, 'README.md')).map((code, i) => ({
        origin: `${group}/${name}/README.md #${i + 1}`,
        code,
        strict: true,
      }))
      for (const file of sourceFiles(join(dir, 'src'))) {
        exampleSnippets(file).forEach((code, i) => {
          snippets.push({
            origin: `${relative(root, file)} @example #${i + 1}`,
            code,
            strict: false,
          })
        })
      }
      result.push({ dir, snippets })
    }
  }
  result.push({
    dir: import.meta.dirname,
    snippets: readmeSnippets(join(root, 'README.md')).map((code, i) => ({
      origin: `README.md #${i + 1}`,
      code,
      strict: true,
    })),
  })
  return result
}

function compile(home: Home): string[] {
  const out = join(home.dir, '.snippets')
  rmSync(out, { recursive: true, force: true })
  mkdirSync(out, { recursive: true })
  const files = home.snippets.map((snippet, i) => {
    const file = join(out, `snippet-${i + 1}.ts`)
    writeFileSync(file, `${snippet.code}\nexport {}\n`)
    return file
  })
  const tsconfig = existsSync(join(home.dir, 'tsconfig.json'))
    ? join(home.dir, 'tsconfig.json')
    : join(root, 'tsconfig.base.json')
  const config = ts.readConfigFile(tsconfig, ts.sys.readFile)
  const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, home.dir)
  const program = ts.createProgram(files, {
    ...options,
    noEmit: true,
    noUnusedLocals: false,
    noUnusedParameters: false,
  })
  const problems: string[] = []
  for (const diagnostic of ts.getPreEmitDiagnostics(program)) {
    const index = diagnostic.file ? files.indexOf(diagnostic.file.fileName) : -1
    const snippet = home.snippets[index]
    if (snippet && !snippet.strict && TOLERATED_IN_EXAMPLES.has(diagnostic.code)) continue
    const where = snippet ? snippet.origin : (diagnostic.file?.fileName ?? 'settings')
    problems.push(`${where}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')}`)
  }
  rmSync(out, { recursive: true, force: true })
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
