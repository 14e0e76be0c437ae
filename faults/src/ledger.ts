import { type IdSource, ShardflakeError, type ShardflakeErrorCode } from '@shardflake/core'

export { countRepeats } from './repeats'

/**
 * The codes a source may answer with while its servers are killed, restarted, stopped or its
 * sessions cancelled. Anything else (a driver error, an `Error`, another code) is a finding.
 */
export const FAULT_CODES: ReadonlySet<ShardflakeErrorCode> = new Set<ShardflakeErrorCode>([
  'CONNECTION_LOST',
  'CONNECTION_REFUSED',
  'TIMED_OUT',
  'CANCELLED',
  'LOCK_TIMEOUT',
  'SOURCE_UNAVAILABLE',
  'SHARD_OVERLOADED',
])

/**
 * The codes a leased source may answer with besides {@link FAULT_CODES}: its lease lapsed or was
 * lost (it stopped at its mark), or no worker may be granted yet (every one held, or the registry
 * waits after losing its data).
 */
export const LEASE_CODES: ReadonlySet<ShardflakeErrorCode> = new Set<ShardflakeErrorCode>([
  ...FAULT_CODES,
  'LEASE_EXPIRED',
  'NO_FREE_LEASE',
])

/** One failure that did not arrive as a ShardflakeError with a fault code. */
export interface Untyped {
  readonly source: string
  readonly what: string
  readonly name: string
  readonly code: string | undefined
  readonly message: string
  readonly stack: string | undefined
  readonly causes: string
}

/** What one window (a server stopped, say) saw. */
export interface WindowFigures {
  readonly name: string
  readonly durationMs: number
  readonly calls: number
  readonly ids: number
  readonly errors: number
  /** Longest call that started inside the window, in ms. */
  readonly maxCallMs: number
}

/** Figures of one source in one scenario. */
export interface LedgerFigures {
  readonly source: string
  readonly calls: number
  readonly ids: number
  readonly errors: Record<string, number>
  readonly untyped: readonly Untyped[]
  readonly wrongShard: number
  readonly wrongCount: number
  /** Batches with IDs whose time field is before the run started (0 unless a counter reset). */
  readonly wrongTime: number
  readonly wrongTimeExamples: readonly string[]
  readonly maxCallMs: number
  readonly windows: readonly WindowFigures[]
}

function describeChain(error: unknown): string {
  const parts: string[] = []
  let current: unknown = error
  for (let depth = 0; current !== undefined && current !== null && depth < 5; depth++) {
    if (current instanceof Error) {
      const code = (current as { code?: unknown }).code
      parts.push(
        `${current.name}${code === undefined ? '' : `(${String(code)})`}: ${current.message}`,
      )
      current = current.cause
    } else {
      parts.push(String(current))
      break
    }
  }
  return parts.join(' <- ')
}

interface OpenWindow {
  name: string
  startedAt: number
  calls: number
  ids: number
  errors: number
  maxCallMs: number
}

/**
 * Everything one source issued (every ID of every acknowledged call, kept as 64-bit integers) and
 * every error it threw, by code.
 */
export class Ledger {
  readonly source: string
  /**
   * The ID space: IDs of sharded sources (time, shard, sequence; every scenario has its own
   * shards) are checked for repeats together; ticket numbers (plain integers) only among
   * themselves, as a small ticket can equal a sharded ID of time 0; IDs of leased sources (a
   * layout with worker bits) among themselves.
   */
  readonly space: 'sharded' | 'tickets' | 'leased'
  calls = 0
  ids = 0
  wrongShard = 0
  wrongCount = 0
  wrongTime = 0
  /** A few IDs whose time field is not of this run, with the call that returned them. */
  readonly wrongTimeExamples: string[] = []
  maxCallMs = 0
  readonly errors = new Map<string, number>()
  readonly untyped: Untyped[] = []
  private readonly chunks: BigUint64Array[] = []
  private chunk = new BigUint64Array(1 << 16)
  private filled = 0
  private readonly windows: WindowFigures[] = []
  private window: OpenWindow | undefined

  /** The codes a failure may carry and still be a typed fault. */
  private readonly codes: ReadonlySet<string>

  constructor(
    source: string,
    space: 'sharded' | 'tickets' | 'leased' = 'sharded',
    codes: ReadonlySet<string> = FAULT_CODES,
  ) {
    this.source = source
    this.space = space
    this.codes = codes
  }

  /** Records the IDs of one acknowledged call. */
  acknowledge(ids: readonly bigint[], startedAt: number, endedAt: number): void {
    this.calls++
    this.ids += ids.length
    for (const id of ids) {
      if (this.filled === this.chunk.length) {
        this.chunks.push(this.chunk)
        this.chunk = new BigUint64Array(1 << 16)
        this.filled = 0
      }
      this.chunk[this.filled++] = id
    }
    this.took(startedAt, endedAt)
    if (this.window && startedAt >= this.window.startedAt) {
      this.window.calls++
      this.window.ids += ids.length
    }
  }

  /** Records a failed call; returns true when it was a ShardflakeError with a fault code. */
  fail(error: unknown, what: string, startedAt: number, endedAt: number): boolean {
    this.calls++
    this.took(startedAt, endedAt)
    if (this.window && startedAt >= this.window.startedAt) this.window.errors++
    const typed = error instanceof ShardflakeError && this.codes.has(error.code)
    const key =
      error instanceof ShardflakeError
        ? error.code
        : `untyped ${error instanceof Error ? error.name : typeof error}${
            (error as { code?: unknown })?.code === undefined
              ? ''
              : ` ${String((error as { code?: unknown }).code)}`
          }`
    this.errors.set(key, (this.errors.get(key) ?? 0) + 1)
    if (!typed && this.untyped.length < 20) {
      this.untyped.push({
        source: this.source,
        what,
        name: error instanceof Error ? error.name : typeof error,
        code:
          (error as { code?: unknown })?.code === undefined
            ? undefined
            : String((error as { code?: unknown }).code),
        message: error instanceof Error ? error.message : String(error),
        stack: error instanceof Error ? error.stack?.split('\n').slice(0, 8).join('\n') : undefined,
        causes: describeChain(error),
      })
    }
    return typed
  }

  /**
   * Records a failure another process reported: a ShardflakeError by its `code`, or (code
   * undefined) anything else, described by `description`. Returns true when it was a typed fault.
   */
  failReported(code: string | undefined, description: string, what: string, at: number): boolean {
    this.calls++
    this.took(at, at)
    if (this.window && at >= this.window.startedAt) this.window.errors++
    const key = code ?? `untyped ${description.split(':')[0]}`
    this.errors.set(key, (this.errors.get(key) ?? 0) + 1)
    const typed = code !== undefined && this.codes.has(code)
    if (!typed && this.untyped.length < 20) {
      this.untyped.push({
        source: this.source,
        what,
        name: code ? 'ShardflakeError' : description.split(':')[0]!,
        code,
        message: description,
        stack: undefined,
        causes: description,
      })
    }
    return typed
  }

  /** Counts an ID outside the shard it was asked for, or a batch of the wrong size. */
  wrong(kind: 'shard' | 'count'): void {
    if (kind === 'shard') this.wrongShard++
    else this.wrongCount++
  }

  /** Counts a batch holding IDs whose time field is before the run began. */
  wrongTimes(what: string, ids: readonly bigint[]): void {
    this.wrongTime++
    if (this.wrongTimeExamples.length < 10) {
      this.wrongTimeExamples.push(
        `${what}: ${ids.slice(0, 8).join(', ')}${ids.length > 8 ? ', ...' : ''}`,
      )
    }
  }

  /** Starts counting what calls started from now on get (one window at a time). */
  openWindow(name: string): void {
    this.window = { name, startedAt: performance.now(), calls: 0, ids: 0, errors: 0, maxCallMs: 0 }
  }

  /** Ends the window; calls that started inside and end later still count. */
  closeWindow(): void {
    const window = this.window
    if (!window) return
    this.window = undefined
    this.windows.push({
      name: window.name,
      durationMs: Math.round(performance.now() - window.startedAt),
      calls: window.calls,
      ids: window.ids,
      errors: window.errors,
      maxCallMs: Math.round(window.maxCallMs),
    })
  }

  /** Every ID acknowledged so far, in one array. */
  allIds(): BigUint64Array {
    const all = new BigUint64Array(this.ids)
    let at = 0
    for (const chunk of this.chunks) {
      all.set(chunk, at)
      at += chunk.length
    }
    all.set(this.chunk.subarray(0, this.filled), at)
    return all
  }

  figures(): LedgerFigures {
    return {
      source: this.source,
      calls: this.calls,
      ids: this.ids,
      errors: Object.fromEntries([...this.errors].sort((a, b) => b[1] - a[1])),
      untyped: this.untyped,
      wrongShard: this.wrongShard,
      wrongCount: this.wrongCount,
      wrongTime: this.wrongTime,
      wrongTimeExamples: this.wrongTimeExamples,
      maxCallMs: Math.round(this.maxCallMs),
      windows: this.windows,
    }
  }

  private took(startedAt: number, endedAt: number): void {
    const ms = endedAt - startedAt
    if (ms > this.maxCallMs) this.maxCallMs = ms
    if (this.window && startedAt >= this.window.startedAt && ms > this.window.maxCallMs) {
      this.window.maxCallMs = ms
    }
  }
}

/** What {@link runLoad} takes. */
export interface LoadOptions {
  readonly ledger: Ledger
  readonly source: IdSource
  readonly shards: readonly number[]
  /** Concurrent loops calling `nextIds`. */
  readonly callers: number
  /** Batch sizes, cycled through. */
  readonly counts: readonly number[]
  /** Ends the loops (they finish their current call). */
  readonly stop: AbortSignal
  /**
   * Every n-th call passes a `context.signal` that aborts after `abortAfterMs` (the caller gives
   * up): such calls may end in CANCELLED.
   */
  readonly abortEvery?: number
  readonly abortAfterMs?: number
  /** Pause after a failed call, so an outage is not a busy loop. @default 20 */
  readonly backoffMs?: number
  /** Given the IDs of each acknowledged call (to write rows with them). */
  readonly onIds?: (ids: bigint[], shard: number) => Promise<void>
}

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Calls `nextIds` from `callers` loops until `stop` aborts, recording everything in the ledger. */
export async function runLoad(options: LoadOptions): Promise<void> {
  const { ledger, source, shards, counts, stop } = options
  const backoff = options.backoffMs ?? 20
  // IDs carry the time they were made: one older than an hour before the load began was not
  // made now (a counter that went back). Loose on purpose: this is not a clock check.
  const notBefore = Date.now() - 3_600_000
  let call = 0
  const loop = async (caller: number) => {
    let i = caller
    while (!stop.aborted) {
      i++
      const n = call++
      const shard = shards[i % shards.length]!
      const count = counts[n % counts.length]!
      const aborting = options.abortEvery !== undefined && n % options.abortEvery === 0
      const context = aborting
        ? { signal: AbortSignal.timeout(options.abortAfterMs ?? 1) }
        : undefined
      const startedAt = performance.now()
      let ids: bigint[]
      try {
        ids = await source.nextIds(shard, count, context)
      } catch (error) {
        ledger.fail(error, `nextIds(${shard}, ${count})`, startedAt, performance.now())
        await pause(backoff)
        continue
      }
      ledger.acknowledge(ids, startedAt, performance.now())
      if (ids.length !== count) ledger.wrong('count')
      const sharding = source.sharding
      if (sharding && ids.some((id) => sharding.shardOfId(id) !== shard)) ledger.wrong('shard')
      // A batch ascends: its first ID has its earliest time. None may be older than the run.
      if (sharding && ids.length > 0 && sharding.layout.timeOf(ids[0]!).getTime() < notBefore) {
        ledger.wrongTimes(`nextIds(${shard}, ${count})`, ids)
      }
      if (options.onIds) await options.onIds(ids, shard)
      // Let timers (fault loops, deadlines) run between calls of a fast synchronous source.
      if (source.synchronous) await pause(1)
    }
  }
  await Promise.all(Array.from({ length: options.callers }, (_, caller) => loop(caller)))
}
