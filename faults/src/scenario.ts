import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
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
 * One scenario: sources under load, faults injected while they run, then the load stops and the
 * figures are saved.
 */
export class Scenario {
  readonly name: string
  readonly faults = new FaultLog()
  readonly rows: Record<string, RowFigures> = {}
  readonly ledgers: Ledger[] = []
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

  ledger(source: string, space: 'sharded' | 'tickets' = 'sharded'): Ledger {
    const ledger = new Ledger(source, space)
    this.ledgers.push(ledger)
    return ledger
  }

  /** Starts load loops (see {@link runLoad}). */
  load(options: Omit<LoadOptions, 'stop'>): void {
    this.loads.push(runLoad({ ...options, stop: this.controller.signal }))
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

  /** Stops the load and the fault loops and waits for them. */
  async stop(): Promise<void> {
    this.controller.abort()
    await Promise.all([...this.loads, ...this.loops])
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
