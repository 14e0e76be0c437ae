/**
 * A reader's new app: an empty ES module package in a temporary folder outside the repository,
 * into which a quick start installs shardflake from the tarballs `pnpm pack` makes (everything
 * else from the npm registry), writes its files, and runs its commands.
 */
import { execFile, spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { appendFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join, sep } from 'node:path'
import { promisify } from 'node:util'
import { withTarballs } from './blocks.ts'

const run = promisify(execFile)

/** The repository's root. */
export const repositoryRoot = join(import.meta.dirname, '..', '..')

/**
 * Packs every published package of `packages/` (`pnpm pack`, from its built `dist/`: run
 * `pnpm build` first) into `directory`, and returns package name → tarball path.
 */
export async function packPackages(directory: string): Promise<Map<string, string>> {
  await mkdir(directory, { recursive: true })
  const tarballs = new Map<string, string>()
  for (const folder of readdirSync(join(repositoryRoot, 'packages')).sort()) {
    const dir = join(repositoryRoot, 'packages', folder)
    const manifestFile = join(dir, 'package.json')
    if (!existsSync(manifestFile)) continue
    const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as {
      name: string
      private?: boolean
      main?: string
      module?: string
    }
    if (manifest.private) continue
    const entry = manifest.module ?? manifest.main
    if (entry && !existsSync(join(dir, entry))) {
      throw new Error(`${manifest.name} is not built (${entry} is missing): run pnpm build first.`)
    }
    const { stdout } = await run('pnpm', ['pack', '--json', '--pack-destination', directory], {
      cwd: dir,
      env: cleanEnvironment({}),
    })
    const packed = JSON.parse(stdout) as { filename: string }
    tarballs.set(manifest.name, packed.filename)
  }
  return tarballs
}

/** The `@shardflake/*` packages that a published package lists in its `dependencies`. */
function dependedOn(): Set<string> {
  const names = new Set<string>()
  for (const folder of readdirSync(join(repositoryRoot, 'packages'))) {
    const file = join(repositoryRoot, 'packages', folder, 'package.json')
    if (!existsSync(file)) continue
    const manifest = JSON.parse(readFileSync(file, 'utf8')) as {
      private?: boolean
      dependencies?: Record<string, string>
    }
    if (manifest.private) continue
    for (const name of Object.keys(manifest.dependencies ?? {})) {
      if (name.startsWith('@shardflake/')) names.add(name)
    }
  }
  return names
}

/**
 * The environment a reader's shell has: this process's, without what the repository, pnpm and
 * vitest put into it (the workspace's `node_modules/.bin` on the PATH would let `npx` find a
 * command the app never installed), plus `extra`. `npx` never downloads a missing command.
 */
export function cleanEnvironment(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (
      /^(npm_|PNPM_|pnpm_|VITEST|NODE_OPTIONS$|NODE_PATH$|NODE_ENV$|INIT_CWD$|TEST$|CI$)/i.test(key)
    )
      continue
    env[key] = value
  }
  env.PATH = (process.env.PATH ?? '')
    .split(':')
    .filter((entry) => entry && !entry.startsWith(repositoryRoot + sep) && entry !== repositoryRoot)
    .join(':')
  // `npx x` for a command the app lacks must fail, not fetch some package named x.
  env.npm_config_yes = 'false'
  env.npm_config_update_notifier = 'false'
  // Prisma's CLI phones home on some commands; the runner has no business doing so.
  env.CHECKPOINT_DISABLE = '1'
  return { ...env, ...extra }
}

/** What ran, for failure messages: the step's place in the README and the end of its output. */
export class StepFailedError extends Error {
  override readonly name = 'StepFailedError'
}

/** A scratch app. */
export interface ScratchApp {
  readonly directory: string
  /** Writes (or, when the file exists, appends) a file of the app. */
  write(file: string, text: string): Promise<void>
  /**
   * Runs a shell script in the app (bash, stopping at the first failing command), with the
   * install commands rewritten to the tarballs. Resolves to its stdout.
   */
  shell(script: string, env: Record<string, string>, timeoutMs: number): Promise<string>
  /** Deletes the app's folder. */
  remove(): Promise<void>
}

/**
 * Creates an empty app: `package.json` (`"type": "module"`, as `npm init` with ES modules gives),
 * and the pnpm settings a scratch app needs to stand for a published install: a shardflake
 * package another depends on (core) resolves to its tarball there too, and peers are not installed
 * unless the README's install line names them (npm 7+ and pnpm install required peers on their
 * own; yarn and older clients do not, so a line must be complete).
 */
export async function createApp(name: string, tarballs: ReadonlyMap<string, string>) {
  const directory = await mkdtemp(join(tmpdir(), `readme-${name}-`))
  if (directory.startsWith(repositoryRoot + sep)) {
    throw new Error(`The scratch app must be outside the repository, not in ${directory}.`)
  }
  await writeFile(
    join(directory, 'package.json'),
    `${JSON.stringify({ name: 'app', version: '1.0.0', private: true, type: 'module' }, null, 2)}\n`,
  )
  // Only the packages others depend on: an override also turns an optional peer into an
  // installed dependency, which would hide a package missing from the README's install line.
  const depended = dependedOn()
  const overrides = [...tarballs]
    .filter(([pkg]) => depended.has(pkg))
    .map(([pkg, file]) => `  '${pkg}': 'file:${file}'`)
    .join('\n')
  await writeFile(
    join(directory, 'pnpm-workspace.yaml'),
    `# A scratch app: shardflake from packed tarballs, peers only when named.\nautoInstallPeers: false\noverrides:\n${overrides}\n`,
  )
  const app: ScratchApp = {
    directory,
    async write(file, text) {
      const path = join(directory, file)
      await mkdir(dirname(path), { recursive: true })
      if (existsSync(path)) {
        const before = await readFile(path, 'utf8')
        await appendFile(path, before.endsWith('\n') ? text : `\n${text}`)
      } else {
        await writeFile(path, text)
      }
    },
    shell: (script, env, timeoutMs) =>
      runShell(withTarballs(script, tarballs), directory, cleanEnvironment(env), timeoutMs),
    async remove() {
      await rm(directory, { recursive: true, force: true })
    },
  }
  return app
}

function runShell(
  script: string,
  cwd: string,
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-e', '-o', 'pipefail', '-c', script], {
      cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString()
    })
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    const timer = setTimeout(() => {
      // The whole process group: a command that hangs (a pool left open) and its children.
      if (child.pid) process.kill(-child.pid, 'SIGKILL')
    }, timeoutMs)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      if (code === 0) resolve(stdout)
      else {
        const why = signal ? `was killed (${signal}) after ${timeoutMs} ms` : `exited with ${code}`
        reject(
          new StepFailedError(`${why}\n--- stdout\n${tail(stdout)}\n--- stderr\n${tail(stderr)}`),
        )
      }
    })
    child.on('error', (error) => {
      clearTimeout(timer)
      reject(error)
    })
  })
}

/** The start and the end of a long output: an error's message comes first, its stack last. */
function tail(text: string, lines = 30): string {
  const all = text.trimEnd().split('\n')
  return (all.length > 2 * lines ? [...all.slice(0, lines), '…', ...all.slice(-lines)] : all).join(
    '\n',
  )
}
