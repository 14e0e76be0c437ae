/**
 * Throwaway database servers for tests that stop, kill, pause or restart a server (failover,
 * timeouts, lost connections) without touching the shared ones. Each starts on a free port with
 * its data in a temporary directory, and fails loudly when it cannot start: it never falls back to
 * a shared server. Commits reach the operating system before they are acknowledged (PostgreSQL
 * `fsync=off` but synchronous commit, MariaDB `innodb_flush_log_at_trx_commit=2`), so a killed
 * server keeps every committed row, as a crash of the server process (not of the machine) does;
 * `durable: true` puts them on disk first.
 */

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
   * {@link restart} brings it back. `SIGSTOP` pauses the server and every process it started,
   * the backends of open PostgreSQL connections included (connections stay open, nothing
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
