import type { ThrowawayServer } from '@shardflake/conformance'
import { defineSharding, type IdSource, InProcessSource, instagram } from '@shardflake/core'
import { checkScenario } from './check'
import { FaultLog, type RowFigures, type ScenarioFigures, saveScenario } from './figures'
import { Ledger, type LoadOptions, runLoad } from './ledger'

/** The one sharding of the whole suite: every source and installer gets this object. */
export const sharding = defineSharding({ layout: instagram, logicalShards: 64 })

const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i)

/**
 * Each scenario's sources get their own logical shards (and the in-process control its own), so
 * the IDs of every scenario can be checked for repeats together.
 */
export const SHARDS = {
  postgres: range(0, 11),
  postgresControl: range(12, 15),
  mysql: range(16, 27),
  mysqlControl: range(28, 31),
  redis: range(32, 43),
  redisControl: range(44, 47),
  ticketsControl: range(48, 51),
} as const

/** `from-to` of a contiguous block, as installers take it. */
export const shardList = (shards: readonly number[]) => `${shards[0]}-${shards[shards.length - 1]}`

/**
 * Rows written with acknowledged IDs: the IDs of the rows whose COMMIT was acknowledged (they must
 * survive every fault), and how many commits failed or never answered (their rows may or may not
 * exist).
 */
export class RowTally {
  readonly committed: bigint[] = []
  uncertain = 0

  constructor(
    /** The table, as the figures name it. */
    readonly table: string,
    /** How many rows of these IDs the table holds. */
    readonly countPresent: (ids: readonly bigint[]) => Promise<number>,
  ) {}
}

/**
 * One scenario: sources under load, faults injected while they run, then the load stops and the
 * figures are saved.
 */
export class Scenario {
  readonly name: string
  readonly faults = new FaultLog()
  readonly rows: Record<string, RowFigures> = {}
  readonly ledgers: Ledger[] = []
  private readonly tallies: RowTally[] = []
  /** Every source loaded: closed when the scenario finishes. */
  private readonly sources = new Set<IdSource>()
  private readonly controller = new AbortController()
  private readonly loads: Promise<void>[] = []
  private readonly loops: Promise<void>[] = []
  private readonly startedAt = performance.now()

  constructor(name: string) {
    this.name = name
  }

  get stopped(): AbortSignal {
    return this.controller.signal
  }

  ledger(
    source: string,
    space: 'sharded' | 'tickets' | 'leased' = 'sharded',
    codes?: ReadonlySet<string>,
  ): Ledger {
    const ledger = new Ledger(source, space, codes)
    this.ledgers.push(ledger)
    return ledger
  }

  /**
   * A tally of the rows the scenario writes into `table` (give it to a row writer), counted with
   * `countPresent` when the scenario finishes.
   */
  rowTally(table: string, countPresent: RowTally['countPresent']): RowTally {
    const tally = new RowTally(table, countPresent)
    this.tallies.push(tally)
    return tally
  }

  /** Starts load loops (see {@link runLoad}). */
  load(options: Omit<LoadOptions, 'stop'>): void {
    this.sources.add(options.source)
    this.loads.push(runLoad({ ...options, stop: this.controller.signal }))
  }

  /**
   * The load of a database scenario: four callers on each of two sources, `passed` (made from a
   * pool passed in) and `owned` (made from a URL: it opens its own pool), and two more on
   * `passed` that write each batch as rows with `onIds`. Ledgers are named after `name`.
   */
  loadDatabaseSources(
    name: string,
    sources: { passed: IdSource; owned: IdSource },
    shards: readonly number[],
    onIds: LoadOptions['onIds'],
  ): void {
    const ways = [
      ['pool passed in', sources.passed],
      ['URL', sources.owned],
    ] as const
    for (const [way, source] of ways) {
      this.load({
        ledger: this.ledger(`${name} (${way})`),
        source,
        shards,
        callers: 4,
        counts: [1, 7, 100, 1000, 1, 128],
        abortEvery: 97,
        abortAfterMs: 2,
      })
    }
    this.load({
      ledger: this.ledger(`${name} (rows)`),
      source: sources.passed,
      shards,
      callers: 2,
      counts: [20, 50],
      onIds,
    })
  }

  /** The in-process control: the same load on its own shards, untouched by any fault. */
  control(shards: readonly number[]): InProcessSource {
    const source = new InProcessSource({ sharding, shards })
    this.load({
      ledger: this.ledger('InProcessSource (control)'),
      source,
      shards,
      callers: 1,
      counts: [1, 10, 100],
    })
    return source
  }

  /** Runs `fault` every `everyMs` until the load stops; its errors are counted, not thrown. */
  every(everyMs: number, kind: string, fault: () => Promise<number | undefined>): void {
    this.loops.push(
      (async () => {
        while (!this.controller.signal.aborted) {
          await new Promise((resolve) => setTimeout(resolve, everyMs))
          if (this.controller.signal.aborted) break
          try {
            const done = await fault()
            if (done) this.faults.add(kind, done)
          } catch {
            this.faults.add(`${kind} (failed: server down or busy)`)
          }
        }
      })(),
    )
  }

  /**
   * Stops `server` (SIGSTOP) for `ms`, counted as `SIGSTOP <seconds> s`, with a window named
   * `<server name> stopped` open on `ledgers` meanwhile; resumes it (SIGCONT) whatever happens.
   */
  async pause(server: ThrowawayServer, ms: number, ledgers: readonly Ledger[]): Promise<void> {
    await server.kill('SIGSTOP')
    this.faults.add(`SIGSTOP ${ms / 1000} s`)
    for (const ledger of ledgers) ledger.openWindow(`${server.name} stopped`)
    try {
      await sleep(ms)
    } finally {
      await server.kill('SIGCONT')
      for (const ledger of ledgers) ledger.closeWindow()
    }
  }

  /**
   * Kills `servers` at once (kill -9), leaves them down for `downMs` and starts them again on
   * their ports and data; counted as `kill -9 <kind>` and `restart`, once per server.
   */
  async crash(servers: readonly ThrowawayServer[], downMs: number): Promise<void> {
    await Promise.all(servers.map((server) => server.kill('SIGKILL')))
    for (const server of servers) this.faults.add(`kill -9 ${server.kind}`)
    await sleep(downMs)
    await Promise.all(servers.map((server) => server.restart()))
    this.faults.add('restart', servers.length)
  }

  /** Stops the load and the fault loops and waits for them. */
  async stop(): Promise<void> {
    this.controller.abort()
    await Promise.all([...this.loads, ...this.loops])
  }

  /**
   * Ends the scenario: stops the load, counts which rows of each {@link rowTally} are still
   * there, saves the figures into `runDir`, closes every source it loaded and then ends `pools`,
   * and checks the figures ({@link checkScenario}). Returns them for the scenario's own checks.
   */
  async finish(
    runDir: string,
    pools: readonly { end(): Promise<void> }[] = [],
  ): Promise<ScenarioFigures> {
    await this.stop()
    for (const tally of this.tallies) {
      const present = await tally.countPresent(tally.committed)
      this.rows[tally.table] = {
        committed: tally.committed.length,
        lost: tally.committed.length - present,
        uncertain: tally.uncertain,
      }
    }
    const figures = this.save(runDir)
    await Promise.all([...this.sources].map((source) => source.close()))
    await Promise.all(pools.map((pool) => pool.end()))
    checkScenario(figures)
    return figures
  }

  save(runDir: string): ScenarioFigures {
    return saveScenario(
      runDir,
      this.name,
      {
        durationMs: Math.round(performance.now() - this.startedAt),
        sources: this.ledgers.map((ledger) => ledger.figures()),
        faults: this.faults.counts,
        rows: this.rows,
      },
      this.ledgers,
    )
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
