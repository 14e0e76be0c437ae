import { type ChildProcess, execFile, spawn } from 'node:child_process'
import {
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import mysql from 'mysql2/promise'
import pg from 'pg'

const run = promisify(execFile)

/**
 * Throwaway servers for the fault suite: each started in its own temporary directory on a free
 * port, owned by this process, killed and restarted at will, and removed at the end. Never the
 * shared servers on 5432/3306/6379.
 */
export interface FaultServer {
  readonly name: string
  readonly port: number
  /** Process id of the server's main process (the postmaster, mariadbd, redis-server). */
  pid(): number
  /** Sends a signal to the main process (SIGSTOP/SIGCONT for a hang, SIGKILL for a crash). */
  signal(signal: NodeJS.Signals): void
  /** Stops it and removes its directory. Safe to call twice. */
  destroy(): Promise<void>
}

const started = new Set<FaultServer>()
const pidsToKill = new Set<number>()

// A test that dies half-way must not leave servers behind (or stopped ones holding ports).
process.once('exit', () => {
  for (const pid of pidsToKill) {
    try {
      process.kill(pid, 'SIGCONT')
      process.kill(pid, 'SIGKILL')
    } catch {}
  }
})

/** Destroys every server this process started. */
export async function destroyAll(): Promise<void> {
  await Promise.all([...started].map((server) => server.destroy()))
}

/** A TCP port nobody listens on right now (the kernel's pick). */
export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      if (await check()) return
    } catch {}
    if (Date.now() > deadline) throw new Error(`${what} did not come up within ${timeoutMs} ms`)
    await sleep(100)
  }
}

function workDir(kind: string): string {
  return mkdtempSync(join(tmpdir(), `shardflake-faults-${kind}-`))
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => child.once('exit', () => resolve()))
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL: initdb + pg_ctl as the `postgres` user when run as root (initdb refuses root).

function postgresBin(): string {
  const base = '/usr/lib/postgresql'
  const versions = readdirSync(base)
    .filter((v) => existsSync(join(base, v, 'bin', 'pg_ctl')))
    .sort((a, b) => Number(b) - Number(a))
  if (!versions[0]) throw new Error(`No PostgreSQL under ${base}`)
  return join(base, versions[0], 'bin')
}

/** A PostgreSQL cluster of its own. */
export interface PostgresServer extends FaultServer {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication). */
  readonly url: string
  /** `pg_ctl restart -m <mode>`: fast (clean) or immediate (a crash: recovery from WAL). */
  restart(mode: 'fast' | 'immediate'): Promise<void>
}

export async function startPostgres(name = 'postgres'): Promise<PostgresServer> {
  const bin = postgresBin()
  const dir = workDir('pg')
  const asRoot = process.getuid?.() === 0
  if (asRoot) {
    const { stdout } = await run('id', ['-u', 'postgres'])
    const { stdout: gid } = await run('id', ['-g', 'postgres'])
    chownSync(dir, Number(stdout.trim()), Number(gid.trim()))
  }
  const pgRun = (tool: string, args: string[]) =>
    asRoot
      ? run('runuser', ['-u', 'postgres', '--', join(bin, tool), ...args])
      : run(join(bin, tool), args)
  const data = join(dir, 'data')
  const log = join(dir, 'server.log')
  await pgRun('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8'])
  const port = await freePort()
  const options = [
    `-p ${port}`,
    `-k ${dir}`,
    '-c listen_addresses=127.0.0.1',
    '-c synchronous_commit=on',
    '-c fsync=on',
    '-c max_connections=200',
    '-c shared_buffers=32MB',
  ].join(' ')
  await pgRun('pg_ctl', ['-D', data, '-l', log, '-w', '-t', '60', '-o', options, 'start'])
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`
  const pid = () => Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0])
  pidsToKill.add(pid())
  let destroyed = false
  const server: PostgresServer = {
    name,
    port,
    url,
    pid,
    signal(signal) {
      process.kill(pid(), signal)
    },
    async restart(mode) {
      pidsToKill.delete(pid())
      await pgRun('pg_ctl', ['-D', data, '-l', log, '-w', '-t', '60', '-m', mode, 'restart'])
      pidsToKill.add(pid())
    },
    async destroy() {
      if (destroyed) return
      destroyed = true
      started.delete(server)
      try {
        pidsToKill.delete(pid())
        await pgRun('pg_ctl', ['-D', data, '-w', '-m', 'immediate', 'stop'])
      } catch {}
      rmSync(dir, { recursive: true, force: true })
    },
  }
  started.add(server)
  await until(`PostgreSQL ${name}`, async () => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    await client.end()
    return true
  })
  return server
}

// ---------------------------------------------------------------------------------------------
// MariaDB: mariadb-install-db into a temporary datadir, mariadbd as the current user.

/** A MariaDB server of its own. */
export interface MariadbServer extends FaultServer {
  /** `mysql://root@127.0.0.1:<port>` (root without a password). */
  readonly url: string
  /** `kill -9` of mariadbd (a crash: InnoDB recovers from its redo log, Aria tables are repaired). */
  crash(): Promise<void>
  /** Starts it again after {@link crash} and waits until it accepts connections. */
  start(): Promise<void>
}

export async function startMariadb(name = 'mariadb'): Promise<MariadbServer> {
  const dir = workDir('mariadb')
  const data = join(dir, 'data')
  const tmp = join(dir, 'tmp')
  mkdirSync(tmp)
  const user = process.getuid?.() === 0 ? ['--user=root'] : []
  await run('mariadb-install-db', [
    '--no-defaults',
    `--datadir=${data}`,
    '--auth-root-authentication-method=normal',
    '--skip-test-db',
    `--tmpdir=${tmp}`,
    ...user,
  ])
  const port = await freePort()
  const url = `mysql://root@127.0.0.1:${port}`
  let child: ChildProcess | undefined
  const log = openSync(join(dir, 'server.log'), 'a')
  const start = async () => {
    const spawned = spawn(
      'mariadbd',
      [
        '--no-defaults',
        `--datadir=${data}`,
        `--tmpdir=${tmp}`,
        `--socket=${join(dir, 'mysqld.sock')}`,
        `--port=${port}`,
        '--bind-address=127.0.0.1',
        `--pid-file=${join(dir, 'mysqld.pid')}`,
        '--skip-name-resolve',
        '--innodb-buffer-pool-size=32M',
        '--innodb-log-file-size=32M',
        '--innodb-flush-log-at-trx-commit=1',
        '--max-connections=300',
        '--skip-log-bin',
        ...user,
      ],
      { stdio: ['ignore', log, log] },
    )
    child = spawned
    if (spawned.pid) pidsToKill.add(spawned.pid)
    spawned.once('exit', () => {
      if (spawned.pid) pidsToKill.delete(spawned.pid)
    })
    await until(`MariaDB ${name}`, async () => {
      if (spawned.exitCode !== null) throw new Error(`mariadbd exited with ${spawned.exitCode}`)
      const connection = await mysql.createConnection({ host: '127.0.0.1', port, user: 'root' })
      await connection.end()
      return true
    })
  }
  let destroyed = false
  const server: MariadbServer = {
    name,
    port,
    url,
    pid: () => child?.pid ?? 0,
    signal(signal) {
      child?.kill(signal)
    },
    async crash() {
      const current = child
      if (!current) return
      current.kill('SIGCONT')
      current.kill('SIGKILL')
      await exited(current)
    },
    start,
    async destroy() {
      if (destroyed) return
      destroyed = true
      started.delete(server)
      await server.crash()
      rmSync(dir, { recursive: true, force: true })
    },
  }
  started.add(server)
  await start()
  return server
}

// ---------------------------------------------------------------------------------------------
// Redis: nothing on disk (the counters' state is meant to be lost on a restart).

/** A Redis server of its own. */
export interface RedisServer extends FaultServer {
  /** `redis://127.0.0.1:<port>` */
  readonly url: string
  /** `kill -9` of redis-server: every key is gone. */
  crash(): Promise<void>
  /** Starts it again (empty) and waits until it answers. */
  start(): Promise<void>
}

export async function startRedis(name = 'redis'): Promise<RedisServer> {
  const dir = workDir('redis')
  const port = await freePort()
  const url = `redis://127.0.0.1:${port}`
  let child: ChildProcess | undefined
  const log = openSync(join(dir, 'server.log'), 'a')
  const start = async () => {
    const spawned = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
      ],
      { stdio: ['ignore', log, log] },
    )
    child = spawned
    if (spawned.pid) pidsToKill.add(spawned.pid)
    spawned.once('exit', () => {
      if (spawned.pid) pidsToKill.delete(spawned.pid)
    })
    await until(`Redis ${name}`, async () => {
      if (spawned.exitCode !== null) throw new Error(`redis-server exited with ${spawned.exitCode}`)
      await run('redis-cli', ['-p', String(port), 'ping'])
      return true
    })
  }
  let destroyed = false
  const server: RedisServer = {
    name,
    port,
    url,
    pid: () => child?.pid ?? 0,
    signal(signal) {
      child?.kill(signal)
    },
    async crash() {
      const current = child
      if (!current) return
      current.kill('SIGCONT')
      current.kill('SIGKILL')
      await exited(current)
    },
    start,
    async destroy() {
      if (destroyed) return
      destroyed = true
      started.delete(server)
      await server.crash()
      rmSync(dir, { recursive: true, force: true })
    },
  }
  started.add(server)
  await start()
  return server
}
