/**
 * Throwaway database servers for tests that stop, kill, pause or restart a server (failover,
 * timeouts, lost connections) without touching the shared ones. Each starts on a free port with
 * its data in a temporary directory, and fails loudly when it cannot start: it never falls back to
 * a shared server. Commits reach the operating system before they are acknowledged (PostgreSQL
 * `fsync=off` but synchronous commit, MariaDB `innodb_flush_log_at_trx_commit=2`), so a killed
 * server keeps every committed row, as a crash of the server process (not of the machine) does;
 * `durable: true` puts them on disk first.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import {
  chownSync,
  existsSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs'
import { createConnection, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import mysql from 'mysql2/promise'
import pg from 'pg'

/** What {@link startPostgres}, {@link startMariadb} and {@link startRedis} take. */
export interface ServerOptions {
  /**
   * The server's name in failure messages (to tell two servers of one kind apart).
   * @default the kind: 'postgres', 'mariadb' or 'redis'
   */
  name?: string
}

/** What {@link startPostgres} and {@link startMariadb} take. */
export interface DatabaseServerOptions extends ServerOptions {
  /**
   * Whether an acknowledged commit is on disk (it survives a crash of the machine, not only of the
   * server): PostgreSQL `fsync=on` and `full_page_writes=on`, MariaDB
   * `innodb_flush_log_at_trx_commit=1`. Off, commits reach the operating system only.
   * @default false
   */
  durable?: boolean
  /** The server's connection limit. @default 100 (PostgreSQL), 151 (MariaDB's own default) */
  maxConnections?: number
}

/**
 * How {@link ThrowawayServer.restart} stops the server: `fast` cleanly (PostgreSQL's fast
 * shutdown, SIGINT; MariaDB and Redis SIGTERM), `immediate` without cleaning up (PostgreSQL's
 * immediate shutdown, SIGQUIT: recovery from the WAL at start; MariaDB and Redis SIGKILL: a crash).
 */
export type RestartMode = 'fast' | 'immediate'

/** A server started by {@link startPostgres}, {@link startMariadb} or {@link startRedis}. */
export interface ThrowawayServer {
  readonly kind: 'postgres' | 'mariadb' | 'redis'
  /** The name it was given. @default the kind */
  readonly name: string
  /** The TCP port on 127.0.0.1. */
  readonly port: number
  /** A connection URL (`postgres://postgres@127.0.0.1:port/postgres`, `mysql://root@…/test`, `redis://…`). */
  readonly url: string
  /** The temporary directory holding the data, socket and log. */
  readonly directory: string
  /** The server's process id while it runs. */
  readonly pid: number | undefined
  /** True while the server process runs (a paused one runs). */
  readonly running: boolean
  /**
   * Sends `signal` to the server and every process it started (its process group). For SIGKILL,
   * SIGTERM, SIGINT and SIGQUIT, waits until the server has exited; the data stays, so
   * {@link restart} brings it back. `SIGSTOP` pauses the server (connections stay open, nothing
   * answers: a server that does not answer in time); `SIGCONT` resumes it.
   * @default 'SIGKILL'
   */
  kill(signal?: NodeJS.Signals): Promise<void>
  /**
   * Stops the server if it runs (see {@link RestartMode}) and starts it again on the same port
   * and data, resolving once it answers. After {@link kill}, it only starts it.
   * @default 'fast'
   */
  restart(mode?: RestartMode): Promise<void>
  /** Stops the server (gracefully, then SIGKILL after 10 s) and deletes its directory. */
  stop(): Promise<void>
  /** The end of the server's log, for failure messages. */
  log(): string
}

/** A TCP port on 127.0.0.1 that nothing listened on a moment ago. */
export async function freePort(): Promise<number> {
  return await new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() =>
        typeof address === 'object' && address
          ? resolve(address.port)
          : reject(new Error('No port was assigned.')),
      )
    })
  })
}

const TERMINATING = new Set<NodeJS.Signals>(['SIGKILL', 'SIGTERM', 'SIGINT', 'SIGQUIT'])
const START_TIMEOUT_MS = 60_000
const live = new Set<ChildProcess>()

process.once('exit', () => {
  for (const child of live) signalGroup(child, 'SIGKILL')
})

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return
  try {
    process.kill(-child.pid, signal)
  } catch {
    child.kill(signal)
  }
}

interface Recipe {
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

/** The uid and gid of `user`, when this process runs as root; else undefined (run as ourselves). */
function identity(user: string | undefined): { uid: number; gid: number } | undefined {
  if (!user || process.getuid?.() !== 0) return undefined
  const uid = Number(execFileSync('id', ['-u', user]).toString().trim())
  const gid = Number(execFileSync('id', ['-g', user]).toString().trim())
  return { uid, gid }
}

async function start(recipe: Recipe, options: ServerOptions): Promise<ThrowawayServer> {
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
    live.add(started)
    exited = new Promise<void>((resolve) => {
      started.once('exit', () => {
        live.delete(started)
        resolve()
      })
      started.once('error', () => {
        live.delete(started)
        resolve()
      })
    })
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
    signalGroup(child, signal)
    if (TERMINATING.has(signal)) {
      // A paused group would not handle the signal.
      if (signal !== 'SIGKILL') signalGroup(child, 'SIGCONT')
      await exited
    }
  }

  /** Stops the server with `signal` (to its main process; SIGKILL after 10 s) and whatever it started. */
  const shutdown = async (signal = recipe.stopSignal) => {
    if (!child || !isRunning()) return
    const current = child
    signalGroup(current, 'SIGCONT')
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

function postgresBin(name: string): string {
  const root = '/usr/lib/postgresql'
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((entry) => existsSync(join(root, entry, 'bin', name)))
        .sort((a, b) => Number(b) - Number(a))
    : []
  if (versions.length === 0) {
    throw new Error(
      `startPostgres: no ${name} under ${root}/*/bin (install the PostgreSQL server).`,
    )
  }
  return join(root, versions[0]!, 'bin', name)
}

/**
 * A PostgreSQL server of its own (initdb into a temporary directory, trust authentication, user
 * `postgres`, fsync off unless `durable`), listening on 127.0.0.1 and a socket in its directory.
 * `url` points at database `postgres`.
 */
export async function startPostgres(options: DatabaseServerOptions = {}): Promise<ThrowawayServer> {
  const durable = options.durable ? 'on' : 'off'
  return await start(
    {
      kind: 'postgres',
      user: 'postgres',
      prepare(directory, run) {
        run(postgresBin('initdb'), [
          '-D',
          join(directory, 'data'),
          '-U',
          'postgres',
          '--auth=trust',
          '--encoding=UTF8',
          '--no-locale',
          '--no-sync',
        ])
      },
      command: (directory, port) => ({
        file: postgresBin('postgres'),
        args: [
          '-D',
          join(directory, 'data'),
          '-p',
          String(port),
          '-k',
          directory,
          '-c',
          'listen_addresses=127.0.0.1',
          '-c',
          `fsync=${durable}`,
          '-c',
          `full_page_writes=${durable}`,
          '-c',
          'shared_buffers=16MB',
          '-c',
          `max_connections=${options.maxConnections ?? 100}`,
        ],
      }),
      url: (port) => `postgres://postgres@127.0.0.1:${port}/postgres`,
      async probe(port) {
        const client = new pg.Client({
          connectionString: `postgres://postgres@127.0.0.1:${port}/postgres`,
          connectionTimeoutMillis: 2_000,
        })
        client.on('error', () => undefined)
        try {
          await client.connect()
          await client.query('SELECT 1')
        } finally {
          await client.end().catch(() => undefined)
        }
      },
      stopSignal: 'SIGINT',
      immediateSignal: 'SIGQUIT',
    },
    options,
  )
}

/**
 * A MariaDB server of its own (mariadb-install-db into a temporary directory, `root` without a
 * password, database `test`), listening on 127.0.0.1 and a socket in its directory.
 */
export async function startMariadb(options: DatabaseServerOptions = {}): Promise<ThrowawayServer> {
  return await start(
    {
      kind: 'mariadb',
      user: 'mysql',
      prepare(directory, run) {
        run('mariadb-install-db', [
          '--no-defaults',
          `--datadir=${join(directory, 'data')}`,
          '--auth-root-authentication-method=normal',
          '--skip-test-db',
        ])
      },
      command: (directory, port) => ({
        file: 'mariadbd',
        args: [
          '--no-defaults',
          `--datadir=${join(directory, 'data')}`,
          `--socket=${join(directory, 'mariadb.sock')}`,
          `--pid-file=${join(directory, 'mariadb.pid')}`,
          `--port=${port}`,
          '--bind-address=127.0.0.1',
          '--skip-log-bin',
          '--innodb-buffer-pool-size=32M',
          '--innodb-log-file-size=16M',
          `--innodb-flush-log-at-trx-commit=${options.durable ? 1 : 2}`,
          '--skip-performance-schema',
          ...(options.maxConnections ? [`--max-connections=${options.maxConnections}`] : []),
        ],
      }),
      url: (port) => `mysql://root@127.0.0.1:${port}/test`,
      async probe(port) {
        const connection = await mysql.createConnection({
          host: '127.0.0.1',
          port,
          user: 'root',
          connectTimeout: 2_000,
        })
        try {
          await connection.query('CREATE DATABASE IF NOT EXISTS test')
        } finally {
          await connection.end().catch(() => undefined)
        }
      },
      stopSignal: 'SIGTERM',
    },
    options,
  )
}

/** A Redis server of its own (no persistence: a restart empties it), listening on 127.0.0.1. */
export async function startRedis(options: ServerOptions = {}): Promise<ThrowawayServer> {
  return await start(
    {
      kind: 'redis',
      command: (directory, port) => ({
        file: 'redis-server',
        args: [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--save',
          '',
          '--appendonly',
          'no',
          '--dir',
          directory,
        ],
      }),
      url: (port) => `redis://127.0.0.1:${port}`,
      async probe(port) {
        const reply = await redisCommand(port, ['PING'])
        if (reply !== 'PONG') throw new Error(`PING answered ${JSON.stringify(reply)}`)
      },
      stopSignal: 'SIGTERM',
    },
    options,
  )
}

/**
 * Sends one command to a Redis server over a fresh connection and returns the reply (simple
 * strings and bulk strings as text, integers as numbers, nil as null). Enough for probes and
 * checks; use a client library for anything else.
 */
export async function redisCommand(
  port: number,
  command: readonly string[],
  timeoutMs = 2_000,
): Promise<string | number | null> {
  return await new Promise((resolve, reject) => {
    const socket = createConnection({ host: '127.0.0.1', port })
    let buffer = ''
    const fail = (error: Error) => {
      socket.destroy()
      reject(error)
    }
    socket.setTimeout(timeoutMs, () => fail(new Error(`Redis on port ${port} did not answer.`)))
    socket.once('error', fail)
    socket.on('data', (data) => {
      buffer += data.toString('utf8')
      const end = buffer.indexOf('\r\n')
      if (end < 0) return
      const head = buffer.slice(0, end)
      const kind = head[0]
      const rest = head.slice(1)
      let reply: string | number | null
      if (kind === '+') reply = rest
      else if (kind === ':') reply = Number(rest)
      else if (kind === '-') return fail(new Error(`Redis: ${rest}`))
      else if (kind === '$') {
        const length = Number(rest)
        if (length < 0) reply = null
        else {
          const body = Buffer.from(buffer.slice(end + 2), 'utf8')
          if (body.length < length + 2) return
          reply = body.subarray(0, length).toString('utf8')
        }
      } else return fail(new Error(`Redis: unexpected reply ${JSON.stringify(head)}`))
      socket.end()
      resolve(reply)
    })
    socket.write(
      `*${command.length}\r\n${command.map((part) => `$${Buffer.byteLength(part)}\r\n${part}\r\n`).join('')}`,
    )
  })
}
