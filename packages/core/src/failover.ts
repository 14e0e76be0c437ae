import type { ShardflakeError } from './errors'

/** A server a {@link Failover} rotates over: skipped until `downUntil` (ms) after a failure. */
export interface FailoverServer {
  downUntil: number
}

/** How a {@link Failover} orders its servers. */
export interface FailoverOptions<S> {
  /** How long a server that failed is skipped, in ms. */
  retryAfterMs: number
  /** `'round-robin'` starts each call one server further; `'failover'` always at the first. */
  strategy: 'failover' | 'round-robin'
  /** Whether a server may be asked now, besides not being skipped. @default always */
  ready?: (server: S) => boolean
  /**
   * The servers skipped after a failure: asked after the healthy ones (`'last'`), or only when
   * none is healthy (`'when-none-healthy'`).
   */
  skipped: 'last' | 'when-none-healthy'
  /** The clock, in ms. @default Date.now */
  now?: () => number
}

/** What {@link Failover.run} does with a failure. */
export interface FailoverHandlers<S> {
  /** The failure as a ShardflakeError (translated from the driver's). */
  translate: (error: unknown, server: S) => ShardflakeError
  /** True: the server is down or did not answer, skip it and ask the next; false: throw. */
  failsOver: (error: ShardflakeError) => boolean
  /** The error when every server asked failed, given each failure in order. */
  unavailable: (failures: readonly [S, ShardflakeError][]) => Error
}

/**
 * Failover between servers: which to ask first (healthy ones in strategy order), one attempt
 * each, and a server that failed skipped for `retryAfterMs` while the next one is asked.
 * Shared by the ticket-server and Redis sources.
 */
export class Failover<S extends FailoverServer> {
  private turn = 0

  constructor(
    readonly servers: readonly S[],
    private readonly options: FailoverOptions<S>,
  ) {}

  /** The servers in the order a call asks them. */
  order(): S[] {
    const { servers, options } = this
    const n = servers.length
    let start = 0
    if (options.strategy === 'round-robin' && n > 1) {
      start = this.turn
      this.turn = (this.turn + 1) % n
    }
    const now = (options.now ?? Date.now)()
    const healthy: S[] = []
    const others: S[] = []
    for (let i = 0; i < n; i++) {
      const server = servers[(start + i) % n]!
      if (server.downUntil <= now && (options.ready?.(server) ?? true)) healthy.push(server)
      else others.push(server)
    }
    if (options.skipped === 'last') return healthy.concat(others)
    return healthy.length > 0 ? healthy : others
  }

  /** Skips the server for `retryAfterMs` from now. */
  markDown(server: S): void {
    server.downUntil = (this.options.now ?? Date.now)() + this.options.retryAfterMs
  }

  /**
   * Runs `attempt` on the servers in {@link order} until one succeeds.
   * @throws the translated failure of a server when it does not fail over.
   * @throws `handlers.unavailable(...)` when every server asked failed.
   */
  async run<R>(attempt: (server: S) => Promise<R>, handlers: FailoverHandlers<S>): Promise<R> {
    const failures: [S, ShardflakeError][] = []
    for (const server of this.order()) {
      try {
        return await attempt(server)
      } catch (error) {
        const failure = handlers.translate(error, server)
        if (!handlers.failsOver(failure)) throw failure
        this.markDown(server)
        failures.push([server, failure])
      }
    }
    throw handlers.unavailable(failures)
  }
}
