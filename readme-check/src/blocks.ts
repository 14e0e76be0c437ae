/**
 * The steps of a README's quick start, read from markers in the README itself.
 *
 * A fenced block is a step when an HTML comment right before it (blank lines and other comments
 * such as `<!-- continues -->` may sit in between) says so:
 *
 * | marker                                   | the step                                               |
 * | ---------------------------------------- | ------------------------------------------------------ |
 * | `<!-- quick-start -->` before ```sh      | run the commands with bash in the app's folder          |
 * | `<!-- quick-start -->` before ```sql     | run the SQL on the variant's `DATABASE_URL`            |
 * | `<!-- quick-start: src/app.ts -->`       | save the block as that file (a later block with the    |
 * |                                          | same name is appended: it continues the file)          |
 * | `<!-- quick-start mariadb: … -->`        | the same, only in the variants named (comma-separated) |
 *
 * Steps run in the order of the README. A block without a variant belongs to every variant.
 * Markers are invisible where READMEs are rendered (GitHub, npm), so the text around a block
 * must tell the reader what the marker tells the runner (the file name, "run this").
 */

/** One step of a quick start. */
export interface Step {
  /** `run`: shell commands; `sql`: statements on `DATABASE_URL`; `file`: saved as {@link file}. */
  readonly kind: 'run' | 'sql' | 'file'
  /** The fence's language (`sh`, `ts`, `typescript`, `prisma`, `json`, ...). */
  readonly language: string
  /** The path in the app for a `file` step (relative, forward slashes). */
  readonly file?: string
  /** The block's text, exactly as in the README. */
  readonly code: string
  /** The variants the step belongs to; `undefined`: every variant. */
  readonly variants?: readonly string[]
  /** Whether `<!-- continues -->` precedes the block too (the snippet type check reads it). */
  readonly continues: boolean
  /** The 1-based line of the opening fence, for messages. */
  readonly line: number
}

/** A marker or a block this module cannot read: the README must be fixed. */
export class QuickStartSyntaxError extends Error {
  override readonly name = 'QuickStartSyntaxError'
}

const SHELL = new Set(['sh', 'bash', 'shell'])
const MARKER = /^<!--\s*quick-start\b(.*?)-->$/
/** After `quick-start`: optional variants, then optional `: file`. */
const MARKER_ARGUMENTS = /^(?:\s+([a-z0-9-]+(?:\s*,\s*[a-z0-9-]+)*))?\s*(?::\s*([^\s]+))?\s*$/
const FILE = /^(?!\/)(?!.*\.\.)[A-Za-z0-9_.\-/]+$/

/**
 * Every quick-start step of a README, in order. Throws {@link QuickStartSyntaxError} (with the
 * line) for a marker that does not parse, a marker followed by no fenced block, a file name that
 * leaves the app's folder, and a block that is neither shell, SQL, nor saved as a file.
 */
export function quickStartSteps(markdown: string): Step[] {
  const lines = markdown.split('\n')
  const steps: Step[] = []
  let pending: { variants?: string[]; file?: string; line: number } | undefined
  let continues = false
  for (let i = 0; i < lines.length; i++) {
    const text = lines[i]!.trim()
    const fence = /^(`{3,})([A-Za-z0-9_-]*)\s*$/.exec(text)
    if (fence) {
      const end = lines.findIndex((other, j) => j > i && other.trim() === fence[1])
      if (end === -1) throw new QuickStartSyntaxError(`line ${i + 1}: a fenced block never ends`)
      if (pending) {
        steps.push(
          step(fence[2]!.toLowerCase(), lines.slice(i + 1, end).join('\n'), pending, continues, i),
        )
      }
      pending = undefined
      continues = false
      i = end
      continue
    }
    if (text === '') continue
    const marker = MARKER.exec(text)
    if (marker) {
      if (pending) {
        throw new QuickStartSyntaxError(
          `line ${i + 1}: a second quick-start marker before the block of line ${pending.line}`,
        )
      }
      const parsed = MARKER_ARGUMENTS.exec(marker[1]!)
      if (!parsed) {
        throw new QuickStartSyntaxError(
          `line ${i + 1}: cannot read ${JSON.stringify(text)}: write <!-- quick-start -->, <!-- quick-start: path/of/file -->, or name variants first: <!-- quick-start postgres, mariadb: file -->`,
        )
      }
      pending = {
        ...(parsed[1] ? { variants: parsed[1].split(',').map((name) => name.trim()) } : {}),
        ...(parsed[2] ? { file: parsed[2] } : {}),
        line: i + 1,
      }
      continue
    }
    if (/^<!--\s*continues\s*-->$/.test(text)) {
      continues = true
      continue
    }
    if (/^<!--[\s\S]*-->$/.test(text)) continue
    if (pending) {
      throw new QuickStartSyntaxError(
        `line ${pending.line}: the quick-start marker is not followed by a fenced block (found ${JSON.stringify(text.slice(0, 40))} on line ${i + 1})`,
      )
    }
    continues = false
  }
  if (pending) {
    throw new QuickStartSyntaxError(`line ${pending.line}: the quick-start marker ends the file`)
  }
  return steps
}

function step(
  language: string,
  code: string,
  marker: { variants?: string[]; file?: string; line: number },
  continues: boolean,
  index: number,
): Step {
  const line = index + 1
  const base = {
    language,
    code,
    continues,
    line,
    ...(marker.variants ? { variants: marker.variants } : {}),
  }
  if (marker.file !== undefined) {
    if (!FILE.test(marker.file)) {
      throw new QuickStartSyntaxError(
        `line ${marker.line}: ${JSON.stringify(marker.file)} is not a relative path inside the app`,
      )
    }
    return { ...base, kind: 'file', file: marker.file }
  }
  if (SHELL.has(language)) return { ...base, kind: 'run' }
  if (language === 'sql') return { ...base, kind: 'sql' }
  throw new QuickStartSyntaxError(
    `line ${line}: a \`\`\`${language || '(no language)'} block can only be saved as a file: name it, <!-- quick-start: path/of/file -->`,
  )
}

/** The variants a README's steps name (empty: the README has one quick start for everyone). */
export function variantsNamed(steps: readonly Step[]): string[] {
  return [...new Set(steps.flatMap((s) => s.variants ?? []))].sort()
}

/** The steps of one variant, in README order. */
export function stepsOf(steps: readonly Step[], variant: string): Step[] {
  return steps.filter((s) => s.variants === undefined || s.variants.includes(variant))
}

/**
 * The files a variant writes, each with its text as the reader assembles it (blocks with one
 * name joined in README order).
 */
export function filesOf(steps: readonly Step[], variant: string): Map<string, string> {
  const files = new Map<string, string>()
  for (const s of stepsOf(steps, variant)) {
    if (s.kind !== 'file') continue
    const before = files.get(s.file!)
    files.set(
      s.file!,
      before === undefined ? ensureNewline(s.code) : `${before}\n${ensureNewline(s.code)}`,
    )
  }
  return files
}

function ensureNewline(text: string): string {
  return text.endsWith('\n') ? text : `${text}\n`
}

/**
 * An install command of the README with shardflake's own packages replaced by the packed
 * tarballs (`pnpm add @shardflake/core pg` → `pnpm add /tmp/…/shardflake-core-0.1.0.tgz pg`):
 * everything else on the line is installed from the registry, as the reader would. Only `pnpm add`
 * lines are rewritten; an `npm install` or `yarn add` naming `@shardflake/…` is refused, so
 * that every quick start installs the same way. Throws for a package that was not packed.
 */
export function withTarballs(script: string, tarballs: ReadonlyMap<string, string>): string {
  return script
    .split('\n')
    .map((line, i) => {
      const names = [...line.matchAll(/(?<![\w/.-])@shardflake\/[a-z0-9-]+(?![\w/.-])/g)]
      const command = line.replace(/#.*$/, '')
      if (!/^\s*pnpm\s+(add|install|i)\b/.test(command)) {
        if (/^\s*(npm\s+(install|i|add)|yarn\s+add|bun\s+add)\b/.test(command) && names.length) {
          throw new QuickStartSyntaxError(
            `install line ${i + 1} of the block: quick starts install with \`pnpm add\`, found ${JSON.stringify(line.trim())}`,
          )
        }
        return line
      }
      return (
        command.replace(/(?<![\w/.-])@shardflake\/[a-z0-9-]+(?![\w/.-])/g, (name) => {
          const tarball = tarballs.get(name)
          if (!tarball) {
            throw new QuickStartSyntaxError(
              `${name} is installed by the quick start but is not a published package of this repository`,
            )
          }
          return tarball
        }) + (line.length > command.length ? line.slice(command.length) : '')
      )
    })
    .join('\n')
}
