/**
 * The quick-start markers, read without running anything (part of `pnpm test`): the parser, the
 * install-line rewrite, and the READMEs themselves: every published package has a quick start,
 * every README with one is known to the runner with the variants its markers name, and every
 * variant installs, then runs something.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  filesOf,
  QuickStartSyntaxError,
  quickStartSteps,
  stepsOf,
  variantsNamed,
  withTarballs,
} from '../src/blocks.ts'
import { QUICK_STARTS } from '../src/quick-starts.ts'

const root = join(import.meta.dirname, '..', '..')

describe('quickStartSteps', () => {
  it('reads marked blocks in order: commands, SQL and files, and skips the others', () => {
    const steps = quickStartSteps(
      [
        '# Title',
        '```sh',
        'not a step',
        '```',
        '<!-- quick-start -->',
        '```sh',
        'pnpm add @shardflake/core',
        '```',
        'Save as `app.ts`:',
        '',
        '<!-- quick-start: src/app.ts -->',
        '',
        '```ts',
        "console.log('a')",
        '```',
        '<!-- quick-start -->',
        '```sql',
        'SELECT 1;',
        '```',
      ].join('\n'),
    )
    expect(steps).toEqual([
      {
        kind: 'run',
        language: 'sh',
        code: 'pnpm add @shardflake/core',
        continues: false,
        line: 6,
      },
      {
        kind: 'file',
        language: 'ts',
        file: 'src/app.ts',
        code: "console.log('a')",
        continues: false,
        line: 13,
      },
      { kind: 'sql', language: 'sql', code: 'SELECT 1;', continues: false, line: 17 },
    ])
  })

  it('keeps variants and <!-- continues --> in either order, and joins the blocks of one file', () => {
    const markdown = [
      '<!-- quick-start: a.ts -->',
      '```ts',
      'one',
      '```',
      '<!-- quick-start pg, my-sql: a.ts -->',
      '<!-- continues -->',
      '```ts',
      'two',
      '```',
      '<!-- continues -->',
      '<!-- quick-start other: a.ts -->',
      '```ts',
      'three',
      '```',
    ].join('\n')
    const steps = quickStartSteps(markdown)
    expect(steps.map((s) => [s.variants, s.continues])).toEqual([
      [undefined, false],
      [['pg', 'my-sql'], true],
      [['other'], true],
    ])
    expect(variantsNamed(steps)).toEqual(['my-sql', 'other', 'pg'])
    expect(stepsOf(steps, 'pg').map((s) => s.code)).toEqual(['one', 'two'])
    expect(filesOf(steps, 'other').get('a.ts')).toBe('one\n\nthree\n')
  })

  it('refuses what it cannot run, naming the line', () => {
    const refused = (markdown: string, message: RegExp) =>
      expect(() => quickStartSteps(markdown)).toThrow(
        expect.objectContaining({
          name: QuickStartSyntaxError.name,
          message: expect.stringMatching(message),
        }),
      )
    refused(
      '<!-- quick-start -->\n```ts\nx\n```',
      /line 2: a ```ts block can only be saved as a file/,
    )
    refused(
      '<!-- quick-start -->\nsome text\n```sh\nx\n```',
      /line 1: .*not followed by a fenced block/,
    )
    refused(
      '<!-- quick-start: ../outside.ts -->\n```ts\nx\n```',
      /not a relative path inside the app/,
    )
    refused(
      '<!-- quick-start: /etc/passwd -->\n```ts\nx\n```',
      /not a relative path inside the app/,
    )
    refused('<!-- quick-start PG: a.ts -->\n```ts\nx\n```', /line 1: cannot read/)
    refused(
      '<!-- quick-start -->\n<!-- quick-start -->\n```sh\nx\n```',
      /a second quick-start marker/,
    )
    refused('text\n<!-- quick-start -->', /ends the file/)
    refused('<!-- quick-start -->\n```sh\nx', /never ends/)
  })
})

describe('withTarballs', () => {
  const tarballs = new Map([
    ['@shardflake/core', '/tmp/t/shardflake-core-0.1.0.tgz'],
    ['@shardflake/postgres', '/tmp/t/shardflake-postgres-0.1.0.tgz'],
  ])

  it('installs shardflake from the tarballs and everything else from the registry', () => {
    expect(
      withTarballs(
        'pnpm add @shardflake/postgres @shardflake/core pg   # @shardflake/core for the layouts\nnode app.ts @shardflake/core',
        tarballs,
      ),
    ).toBe(
      'pnpm add /tmp/t/shardflake-postgres-0.1.0.tgz /tmp/t/shardflake-core-0.1.0.tgz pg   # @shardflake/core for the layouts\nnode app.ts @shardflake/core',
    )
    expect(withTarballs('pnpm add -D @shardflake/core', tarballs)).toBe(
      'pnpm add -D /tmp/t/shardflake-core-0.1.0.tgz',
    )
  })

  it('refuses an unpublished package, and npm or yarn installing shardflake', () => {
    expect(() => withTarballs('pnpm add @shardflake/drizzle', tarballs)).toThrow(
      /@shardflake\/drizzle .* not a published package/,
    )
    expect(() => withTarballs('npm install @shardflake/core', tarballs)).toThrow(/pnpm add/)
    expect(() => withTarballs('yarn add @shardflake/core', tarballs)).toThrow(/pnpm add/)
  })
})

/** Every README of the repository, relative to its root. */
function readmes(): string[] {
  const found = ['README.md']
  for (const group of ['packages', 'examples']) {
    for (const name of readdirSync(join(root, group)).sort()) {
      if (existsSync(join(root, group, name, 'README.md'))) found.push(`${group}/${name}/README.md`)
    }
  }
  return found
}

describe('the READMEs', () => {
  const all = readmes()

  it('finds the READMEs', () => {
    expect(all).toContain('packages/core/README.md')
  })

  it('every published package has a quick start', () => {
    const missing = readdirSync(join(root, 'packages'))
      .filter((name) => existsSync(join(root, 'packages', name, 'package.json')))
      .filter((name) => {
        const manifest = JSON.parse(
          readFileSync(join(root, 'packages', name, 'package.json'), 'utf8'),
        ) as { private?: boolean }
        return !manifest.private
      })
      .map((name) => `packages/${name}/README.md`)
      .filter(
        (readme) =>
          !existsSync(join(root, readme)) ||
          quickStartSteps(readFileSync(join(root, readme), 'utf8')).length === 0,
      )
    // A new package: mark its quick start (readme-check/README.md) and add it to quick-starts.ts.
    expect(missing).toEqual([])
  })

  for (const readme of all) {
    it(`${readme}: markers parse, and the runner knows its variants`, () => {
      const steps = quickStartSteps(readFileSync(join(root, readme), 'utf8'))
      const known = QUICK_STARTS.find((q) => q.readme === readme)
      if (steps.length === 0) {
        expect(
          known,
          `${readme} has no quick-start markers but is in quick-starts.ts`,
        ).toBeUndefined()
        return
      }
      expect(
        known,
        `${readme} has a quick start: add it to readme-check/src/quick-starts.ts`,
      ).toBeDefined()
      const named = variantsNamed(steps)
      expect(Object.keys(known!.variants).sort()).toEqual(named.length ? named : ['default'])
      for (const variant of Object.keys(known!.variants)) {
        const own = stepsOf(steps, variant)
        const runs = own.filter((s) => s.kind === 'run')
        // It starts from an empty app: the first command installs, and something runs afterwards.
        expect(runs[0]?.code, `${readme} (${variant}) must start with its install line`).toMatch(
          /^\s*pnpm add /m,
        )
        expect(runs.length, `${readme} (${variant}) installs but runs nothing`).toBeGreaterThan(1)
        expect(own.indexOf(runs[0]!), `${readme} (${variant}) installs after its first step`).toBe(
          0,
        )
      }
    })
  }
})
