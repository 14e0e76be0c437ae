import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { chownSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from './free-port'
import { identity, signalGroup, signalTree, track } from './processes'
import type { ServerOptions, ThrowawayServer } from './throwaway-server'

const TERMINATING = new Set<NodeJS.Signals>(['SIGKILL', 'SIGTERM', 'SIGINT', 'SIGQUIT'])
const START_TIMEOUT_MS = 60_000

/** How to prepare, run and probe one kind of server. */
export interface Recipe {
  kind: ThrowawayServer['kind']
  /** The user the server runs as when this process is root (servers refuse root). */
  user?: string
  /** One-time preparation of the directory (initdb, mariadb-install-db). */
  prepare?: (directory: string, run: (file: string, args: string[]) => void) => void
  command: (directory: string, port: number) => { file: string; args: string[] }
  url: (port: number) => string
  /** Resolves once the server answers; throws while it does not. */
  probe: (port: number, directory: string) => Promise<void>
  /** The signal of a graceful stop. */
  stopSignal: NodeJS.Signals
  /** The signal of a stop without cleaning up. @default 'SIGKILL' */
  immediateSignal?: NodeJS.Signals
}

/**
 * Starts the server of `recipe` in a new temporary directory on a free port, and resolves once it
 * answers; removes the directory and throws (with the end of the log) when it does not start.
 */
export async function startServer(
  recipe: Recipe,
  options: ServerOptions,
): Promise<ThrowawayServer> {
  const name = options.name ?? recipe.kind
  const directory = mkdtempSync(join(tmpdir(), `sf-${recipe.kind}-`))
  const owner = identity(recipe.user)
  if (owner) chownSync(directory, owner.uid, owner.gid)
  const logFile = join(directory, 'server.log')
  const run = (file: string, args: string[]) => {
    try {
      execFileSync(file, args, {
        stdio: ['ignore', 'pipe', 'pipe'],
        ...(owner ?? {}),
        cwd: directory,
      })
    } catch (error) {
      const output = error as { stderr?: Buffer; stdout?: Buffer }
      throw new Error(
        `${name}: ${file} ${args.join(' ')} failed:\n${output.stderr?.toString() ?? ''}${output.stdout?.toString() ?? ''}`,
        { cause: error },
      )
    }
  }
  try {
    recipe.prepare?.(directory, run)
  } catch (error) {
    rmSync(directory, { recursive: true, force: true })
    throw error
  }
  const port = await freePort()
  let child: ChildProcess | undefined
  let exited: Promise<void> = Promise.resolve()

  const readLog = () => (existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(-4_000) : '')

  const launch = async () => {
    const { file, args } = recipe.command(directory, port)
    const out = openSync(logFile, 'a')
    if (owner) chownSync(logFile, owner.uid, owner.gid)
    const started = spawn(file, args, {
      cwd: directory,
      detached: true,
      stdio: ['ignore', out, out],
      ...(owner ?? {}),
    })
    child = started
    exited = track(started)
    const deadline = Date.now() + START_TIMEOUT_MS
    let last: unknown
    for (;;) {
      if (started.exitCode !== null || started.signalCode !== null || started.pid === undefined) {
        throw new Error(
          `${name} on port ${port} exited while starting (code ${started.exitCode}, signal ${started.signalCode}). Log:\n${readLog()}`,
        )
      }
      try {
        await recipe.probe(port, directory)
        return
      } catch (error) {
        last = error
      }
      if (Date.now() > deadline) {
        signalGroup(started, 'SIGKILL')
        await exited
        throw new Error(
          `${name} on port ${port} did not answer within ${START_TIMEOUT_MS} ms (last: ${String(last)}). Log:\n${readLog()}`,
          { cause: last },
        )
      }
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }

  const isRunning = () =>
    child !== undefined && child.exitCode === null && child.signalCode === null

  const kill = async (signal: NodeJS.Signals = 'SIGKILL') => {
    if (!child || !isRunning()) return
    // Pausing and resuming reach every process of the server, open connections' included.
    if (signal === 'SIGSTOP' || signal === 'SIGCONT') signalTree(child, signal)
    else signalGroup(child, signal)
    if (TERMINATING.has(signal)) {
      // A paused group would not handle the signal.
      if (signal !== 'SIGKILL') signalTree(child, 'SIGCONT')
      await exited
    }
  }

  /** Stops the server with `signal` (to its main process; SIGKILL after 10 s) and whatever it started. */
  const shutdown = async (signal = recipe.stopSignal) => {
    if (!child || !isRunning()) return
    const current = child
    signalTree(current, 'SIGCONT')
    current.kill(signal)
    const timer = setTimeout(() => signalGroup(current, 'SIGKILL'), 10_000)
    await exited
    clearTimeout(timer)
    // Children of the server (PostgreSQL backends) leave with it; make sure.
    signalGroup(current, 'SIGKILL')
  }

  try {
    await launch()
  } catch (error) {
    rmSync(directory, { recursive: true, force: true })
    throw error
  }

  return {
    kind: recipe.kind,
    name,
    port,
    url: recipe.url(port),
    directory,
    get pid() {
      return isRunning() ? child?.pid : undefined
    },
    get running() {
      return isRunning()
    },
    kill,
    async restart(mode = 'fast') {
      await shutdown(mode === 'fast' ? recipe.stopSignal : (recipe.immediateSignal ?? 'SIGKILL'))
      await launch()
    },
    async stop() {
      await shutdown()
      rmSync(directory, { recursive: true, force: true })
    },
    log: readLog,
  }
}
