/**
 * Every TypeScript snippet in README.md must compile against the packages as they are. Each
 * ```ts block becomes its own module and goes through the type checker with the project's
 * settings; the demo the quick start promises must exist.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const root = join(import.meta.dirname, '..')
const readme = readFileSync(join(root, 'README.md'), 'utf8')
const snippets = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]!)

describe('README.md', () => {
  it('has TypeScript snippets', () => {
    expect(snippets.length).toBeGreaterThanOrEqual(3)
  })

  it('compiles every TypeScript snippet', () => {
    const dir = join(import.meta.dirname, '.tmp', 'readme')
    rmSync(dir, { recursive: true, force: true })
    mkdirSync(dir, { recursive: true })
    const files = snippets.map((code, index) => {
      const file = join(dir, `snippet-${index + 1}.ts`)
      writeFileSync(file, `${code}\nexport {}\n`)
      return file
    })
    const config = ts.readConfigFile(join(root, 'tsconfig.base.json'), ts.sys.readFile)
    const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, root)
    const program = ts.createProgram(files, { ...options, noEmit: true, noUnusedLocals: false })
    const diagnostics = ts.getPreEmitDiagnostics(program).map((diagnostic) => {
      const where = diagnostic.file ? `${diagnostic.file.fileName.split('/').pop()}: ` : ''
      return `${where}${ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')}`
    })
    expect(diagnostics).toEqual([])
  })

  it('runs the commands it shows', () => {
    const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>
    }
    for (const command of readme.matchAll(/^pnpm ([a-z]+)/gm)) {
      if (['install', 'exec'].includes(command[1]!)) continue
      expect(Object.keys(manifest.scripts)).toContain(command[1])
    }
  })
})
