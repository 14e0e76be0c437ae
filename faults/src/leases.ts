import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'
import { defineLayout, defineSharding, type LayoutOptions } from '@shardflake/core'
import { LEASE_CODES, type Ledger } from './ledger'
import type { Scenario } from './scenario'

/**
 * The layout of the lease scenarios: 3 worker bits (8 workers, 7 leasable: registries keep
 * worker 0 for database functions), 7 sequence bits. Its IDs are checked for repeats among
 * themselves (space `leased`); each scenario makes them for shards of its own.
 */
const LEASED_LAYOUT: LayoutOptions = {
  name: 'faults-leased',
  epoch: '2025-01-01T00:00:00Z',
  timeBits: 41,
  shardBits: 13,
  workerBits: 3,
  sequenceBits: 7,
}
export const leasedSharding = defineSharding({
  layout: defineLayout(LEASED_LAYOUT),
  logicalShards: 64,
})

const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i)

/** The shards each lease scenario's holders make IDs for. */
export const LEASE_SHARDS = {
  redis: range(0, 7),
  postgres: range(8, 15),
  mysql: range(16, 23),
} as const

/** Where the holders lease their workers. */
export interface LeaseRegistryTarget {
  readonly kind: 'redis' | 'postgres' | 'mysql'
  readonly url: string
  readonly maxTtlMs: number
  readonly shards: readonly number[]
}

const HOLDER = join(import.meta.dirname, '..', 'fixtures', 'lease-holder.mjs')

/**
 * A holder process (`fixtures/lease-holder.mjs`): a LeasedSource in a process of its own, making
 * batches of 50 IDs for the target's shards until it is killed. Every batch it prints is an
 * acknowledged batch of its ledger; every error it prints is recorded there by code. Only
 * whole lines count: a process killed in the middle of a line has not acknowledged that batch.
 */
export class Holder {
  readonly process: ChildProcess
  /** Leases taken, in order: worker and token. */
  readonly leases: { worker: number; token: string }[] = []
  private stopping = false
  private readonly exited: Promise<void>

  constructor(
    readonly name: string,
    readonly ttlMs: number,
    ledger: Ledger,
    target: LeaseRegistryTarget,
  ) {
    const shards = target.shards
    this.process = spawn(process.execPath, [HOLDER], {
      env: {
        ...process.env,
        REGISTRY: target.kind,
        URL: target.url,
        LAYOUT: JSON.stringify(LEASED_LAYOUT),
        LOGICAL_SHARDS: String(leasedSharding.logicalShards),
        SHARDS: `${shards[0]}-${shards[shards.length - 1]}`,
        TTL_MS: String(ttlMs),
        MAX_TTL_MS: String(target.maxTtlMs),
        TIMEOUT_MS: '1000',
        HOLDER: name,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const { layout } = leasedSharding
    // IDs carry the time they were made: one older than an hour before the run was not made now.
    const notBefore = Date.now() - 3_600_000
    let rest = ''
    this.process.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      const lines = (rest + chunk).split('\n')
      rest = lines.pop()!
      const at = performance.now()
      for (const line of lines) {
        const kind = line.slice(0, 2)
        const body = line.slice(2)
        if (kind === 'I ') {
          const [shard, ...values] = body.split(' ')
          const ids = values.map(BigInt)
          ledger.acknowledge(ids, at, at)
          if (ids.length !== 50) ledger.wrong('count')
          if (ids.some((id) => leasedSharding.shardOfId(id) !== Number(shard))) {
            ledger.wrong('shard')
          }
          if (!shards.includes(Number(shard))) ledger.wrong('shard')
          if (ids.length > 0 && layout.timeOf(ids[0]!).getTime() < notBefore) {
            ledger.wrongTimes(`${name}: nextIds(${shard}, 50)`, ids)
          }
        } else if (kind === 'L ') {
          const [worker, token] = body.split(' ')
          this.leases.push({ worker: Number(worker), token: token! })
        } else if (kind === 'E ') {
          ledger.failReported(body, body, `${name} (TTL ${ttlMs} ms)`, at)
        } else if (kind === 'U ') {
          ledger.failReported(undefined, body, `${name} (TTL ${ttlMs} ms)`, at)
        }
      }
    })
    this.exited = new Promise((resolve) => {
      this.process.once('exit', (code, signal) => {
        // Only this suite ends a holder; a holder that ends on its own crashed.
        if (!this.stopping) {
          ledger.failReported(
            undefined,
            `ProcessExit: ${name} exited (code ${code}, signal ${signal})`,
            name,
            performance.now(),
          )
        }
        resolve()
      })
    })
  }

  /** Resolves once the holder printed its first lease. */
  async leased(timeoutMs = 60_000): Promise<void> {
    const until = Date.now() + timeoutMs
    while (this.leases.length === 0) {
      if (Date.now() > until) throw new Error(`${this.name} took no lease in ${timeoutMs} ms.`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }

  /** SIGSTOP: the process stops between two instructions, its renewals with it. */
  pause(): void {
    this.process.kill('SIGSTOP')
  }

  resume(): void {
    this.process.kill('SIGCONT')
  }

  /** kill -9, and waits until it is gone. */
  async kill(): Promise<void> {
    this.stopping = true
    this.process.kill('SIGCONT')
    this.process.kill('SIGKILL')
    await this.exited
  }
}

/** The holders of one lease scenario, with one ledger per TTL. */
export class Holders {
  private readonly live = new Set<Holder>()
  private readonly ledgers = new Map<number, Ledger>()
  private spawned = 0

  constructor(
    private readonly scenario: Scenario,
    private readonly target: LeaseRegistryTarget,
  ) {}

  /** Starts a holder with `ttlMs`. */
  spawn(ttlMs: number): Holder {
    let ledger = this.ledgers.get(ttlMs)
    if (!ledger) {
      ledger = this.scenario.ledger(
        `LeasedSource, ${this.target.kind} registry, TTL ${ttlMs} ms (processes)`,
        'leased',
        LEASE_CODES,
      )
      this.ledgers.set(ttlMs, ledger)
    }
    this.spawned++
    const holder = new Holder(`holder-${this.spawned}`, ttlMs, ledger, this.target)
    this.live.add(holder)
    return holder
  }

  /** kill -9 of `holder`, counted as a fault, and a new holder with its TTL in its place. */
  async replace(holder: Holder): Promise<Holder> {
    await this.stop(holder)
    this.scenario.faults.add('kill -9 of a holder')
    return this.spawn(holder.ttlMs)
  }

  async stop(holder: Holder): Promise<void> {
    this.live.delete(holder)
    await holder.kill()
  }

  /** Ends every holder (at the end of the scenario). */
  async stopAll(): Promise<void> {
    await Promise.all([...this.live].map((holder) => this.stop(holder)))
  }

  /** The workers the live holders hold now (their last lease each). */
  workers(): number[] {
    return [...this.live].map((holder) => holder.leases.at(-1)?.worker ?? -1)
  }
}
