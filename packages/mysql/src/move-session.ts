import { LockTimeoutError, SourceUnavailableError } from '@shardflake/core'
import type { PoolConnection } from 'mysql2/promise'
import { translateError } from './errors'

/** Where a shard stands when a step fails, for the error message. @internal */
export type Stage = 'untouched' | 'fenced' | 'arriving' | 'done'

/** One connection of a move, with what it changed in the session (restored on close). @internal */
export class MoveSession {
  stage: Stage = 'untouched'
  private saved: { lock: unknown; innodb: unknown } | undefined
  private readonly held = new Set<string>()

  constructor(readonly connection: PoolConnection) {}

  /** MySQL's lock waits (metadata, InnoDB rows) in whole seconds, at least one. */
  async limitLockWaits(ms: number): Promise<void> {
    const [rows] = await this.connection.query(
      'SELECT @@SESSION.lock_wait_timeout AS `lock`, @@SESSION.innodb_lock_wait_timeout AS innodb',
    )
    const row = (rows as { lock?: unknown; innodb?: unknown }[])[0]
    this.saved = { lock: row?.lock, innodb: row?.innodb }
    const seconds = Math.max(1, Math.ceil(ms / 1000))
    await this.connection.query(
      `SET SESSION lock_wait_timeout = ${seconds}, innodb_lock_wait_timeout = ${seconds}`,
    )
  }

  /** A named lock (`GET_LOCK`), so that two moves of one shard do not interleave. */
  async lock(name: string, ms: number, shard: number, home: 'old' | 'new'): Promise<void> {
    const [rows] = await this.connection.query('SELECT GET_LOCK(?, ?) AS ok', [name, ms / 1000])
    if (Number((rows as { ok?: unknown }[])[0]?.ok) !== 1) {
      throw new LockTimeoutError(
        `Moving logical shard ${shard}: another move of it holds the lock ${name} on the ${home} server, still after ${ms} ms. Nothing of this shard was changed; run the move again when the other one has ended.`,
      )
    }
    this.held.add(name)
  }

  async unlock(name: string): Promise<void> {
    if (!this.held.delete(name)) return
    await this.connection.query('SELECT RELEASE_LOCK(?)', [name]).catch(() => undefined)
  }

  /** Back to the pool as it came (settings restored, locks released), or destroyed. */
  async close(failure: unknown): Promise<void> {
    try {
      if (failure !== undefined) {
        const code = translateError(failure, { what: 'a server of the move' }).code
        if (code === 'CONNECTION_LOST' || code === 'CONNECTION_REFUSED') throw failure
      }
      for (const name of [...this.held]) await this.unlock(name)
      if (this.saved) {
        await this.connection.query(
          'SET SESSION lock_wait_timeout = ?, innodb_lock_wait_timeout = ?',
          [this.saved.lock, this.saved.innodb],
        )
      }
      this.connection.release()
    } catch {
      this.connection.destroy()
    }
  }
}

/**
 * Whether two connections reach the same server: one holds a random named lock, and the other
 * sees it taken only on the same server (named locks are per server). No privileges needed; sees
 * through host names, ports, proxies and sockets. @internal
 */
export async function sameServer(a: MoveSession, b: MoveSession): Promise<boolean> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const bytes = crypto.getRandomValues(new Uint8Array(12))
    const name = `sf_probe_${[...bytes].map((x) => x.toString(16).padStart(2, '0')).join('')}`
    const [held] = await a.connection.query('SELECT GET_LOCK(?, 0) AS ok', [name])
    if (Number((held as { ok?: unknown }[])[0]?.ok) !== 1) continue
    try {
      const [free] = await b.connection.query('SELECT IS_FREE_LOCK(?) AS free', [name])
      return Number((free as { free?: unknown }[])[0]?.free) !== 1
    } finally {
      await a.connection.query('SELECT RELEASE_LOCK(?)', [name])
    }
  }
  throw new SourceUnavailableError(
    'Could not tell whether from and to are the same server (no free named lock).',
  )
}

/** A name for the new home, recorded on the old one (what the server says; no credentials). @internal */
export async function describeServer(session: MoveSession): Promise<string> {
  const [rows] = await session.connection.query('SELECT @@hostname AS host, @@port AS port')
  const row = (rows as { host?: unknown; port?: unknown }[])[0]
  const host = String(row?.host ?? 'unknown')
    // biome-ignore lint/suspicious/noControlCharactersInRegex: they are what is removed
    .replace(/[\u0000-\u001f\u007f]/g, '')
    .slice(0, 40)
  return `server ${host}:${String(row?.port ?? '?')}`
}
