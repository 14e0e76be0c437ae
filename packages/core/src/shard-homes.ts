import { throwIfCancelled } from './deadline'
import {
  CancelledError,
  ConfigurationError,
  DirectoryStaleError,
  InvalidArgumentError,
  ShardMovingError,
  ShardOutOfRangeError,
  WrongServerError,
} from './errors'
import {
  checkFanOut,
  type FanOutOptions,
  type FanOutRun,
  type FanOutStep,
  runFanOut,
} from './fan-out'
import type { IdInput } from './id-value'
import { checkKnownOptions, describeValue } from './known-options'
import {
  checkDirectoryEntries,
  type DirectoryEntry,
  type DirectorySnapshot,
  HOMES_DEFAULTS,
  isShardDirectory,
  type ShardDirectory,
  StaticDirectory,
} from './shard-directory'
import type { ShardKey } from './shard-key'
import { distinctShards, formatShardList, readShardList, ShardMap } from './shard-map'
import { requireSharding, type Sharding } from './sharding'
import { readDuration } from './source-options'

/**
 * What {@link ShardHomes.open} takes.
 * @example
 * ```ts
 * import { ShardMap, type ShardHomesOptions, type Sharding } from '@shardflake/core'
 * declare const sharding: Sharding
 *
 * const options: ShardHomesOptions<string> = {
 *   sharding,
 *   servers: { a: 'postgres://db-a/app' },
 *   directory: ShardMap.single(sharding, 'a'),
 *   refreshMs: 1000,
 *   switchWaitMs: 2000,
 * }
 * ```
 */
export interface ShardHomesOptions<H> {
  /** The application's sharding; the directory must have been created for the same one. */
  readonly sharding: Sharding
  /**
   * Every server by name, with its handle (a pool, a DataSource, a PrismaClient, a MikroORM
   * instance): every server the directory names must be here.
   */
  readonly servers: Readonly<Record<string, H>>
  /**
   * Where the homes are read from: a `ShardMap` of server names (fixed in code, no online
   * moves), or a directory every process reads (`PostgresShardDirectory`, `MysqlShardDirectory`).
   * `close()` leaves it open: close it yourself.
   */
  readonly directory: ShardDirectory | ShardMap<string>
  /**
   * How often the directory is read again in the background, in ms. Must be below half the
   * directory's `maxStaleMs`.
   * @default 1000
   */
  readonly refreshMs?: number
  /**
   * How long a write to a shard that is being moved (`switching` or `arriving`) waits for the
   * move to finish before it fails with `ShardMovingError`, in ms.
   * @default 2000
   */
  readonly switchWaitMs?: number
}

/**
 * Where a write goes: the server holding the shard, and its handle.
 * @example
 * ```ts
 * import type { ShardHomes } from '@shardflake/core'
 * declare const homes: ShardHomes<unknown>
 *
 * const { server, handle } = await homes.writeHome(17)
 * ```
 */
export interface WriteHome<H> {
  readonly server: string
  readonly handle: H
}

/**
 * One server's share of a write split by {@link ShardHomes.writeGroups}.
 * @example
 * ```ts
 * import type { ShardHomes } from '@shardflake/core'
 * declare const homes: ShardHomes<unknown>
 *
 * for (const [server, { handle, items }] of await homes.writeGroups([3, 40], (shard) => shard)) {
 *   console.log(server, items)
 * }
 * ```
 */
export interface WriteGroup<H, T> {
  readonly handle: H
  readonly items: T[]
}

const OPTIONS = ['sharding', 'servers', 'directory', 'refreshMs', 'switchWaitMs']
/** How often a write waiting for a move re-reads the directory, at most, in ms. */
const WAIT_POLL_MS = 100
const RESOLVED = Promise.resolve()

/** What was read, and when the read was sent. */
interface Reading {
  readonly snapshot: DirectorySnapshot
  readonly homes: ShardMap<DirectoryEntry>
  /** `performance.now()` when the read was sent. */
  readonly sentAt: number
  /** `Date.now()` when the read was sent (a suspended machine stops the monotonic clock). */
  readonly sentAtWall: number
  /** The entries looked up so far, by logical shard: each shard is searched for once. */
  readonly byShard: Map<number, DirectoryEntry>
}

/**
 * Where every logical shard's rows live, for an application whose rows are spread over several
 * database servers: the server holding a shard (its home), the handle to reach it, and the
 * routing built on that. Reads by ID, key or shard go to one server; writes go to their shard's
 * home, waiting while a move switches it; a query over several servers is an explicit
 * {@link fanOut}, never implicit.
 *
 * The homes come from a directory that every process reads again every `refreshMs`. A process
 * never routes with a reading older than the directory's `maxStaleMs`, measured from when the
 * read was sent on its own monotonic clock (and on its wall clock, whichever says older): a
 * process that was paused reads again before it routes. This is what lets a move change a home
 * while the application runs: it waits `maxStaleMs` after each change, and then every process
 * routes by the new one.
 *
 * @example
 * ```ts
 * import { defineSharding, instagram, ShardHomes, ShardMap } from '@shardflake/core'
 * type Pool = { query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> } // a pg.Pool
 * declare const poolA: Pool, poolB: Pool
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * const homes = await ShardHomes.open({
 *   sharding,
 *   servers: { a: poolA, b: poolB },
 *   directory: new ShardMap(sharding, [
 *     { from: 0, to: 31, target: 'a' },
 *     { from: 32, to: 63, target: 'b' },
 *   ]),
 * })
 * const user = await homes.forKey(31341n).query('SELECT * FROM users WHERE id = $1', [31341])
 * const { handle } = await homes.writeHome(sharding.shardForKey(31341n))
 * await homes.close()
 * ```
 */
export class ShardHomes<H> {
  /** The application's sharding. */
  readonly sharding: Sharding
  /** Where the homes are read from. */
  readonly directory: ShardDirectory
  private readonly handles: ReadonlyMap<string, H>
  private readonly refreshMs: number
  private readonly switchWaitMs: number
  private reading!: Reading
  private inFlight: { promise: Promise<Reading>; sentAt: number } | undefined
  /**
   * The reading found fresh, by less than half its `maxStaleMs`, earlier in this synchronous
   * turn (cleared by a microtask): the many per-row checks of one write read the clocks once
   * (each read costs microseconds on some virtual machines).
   */
  private freshThisTurn: Reading | undefined
  private readonly endTurn = (): void => {
    this.freshThisTurn = undefined
  }
  private lastFailure: unknown
  private timer: ReturnType<typeof setTimeout> | undefined
  private closed = false

  private constructor(
    sharding: Sharding,
    directory: ShardDirectory,
    handles: ReadonlyMap<string, H>,
    refreshMs: number,
    switchWaitMs: number,
  ) {
    this.sharding = sharding
    this.directory = directory
    this.handles = handles
    this.refreshMs = refreshMs
    this.switchWaitMs = switchWaitMs
  }

  /**
   * Reads the directory, checks it against the options, and starts reading it again every
   * `refreshMs`.
   * @throws InvalidArgumentError for options that are not valid.
   * @throws ConfigurationError when the directory names a server missing from `servers`, or
   * `refreshMs` is not below half its `maxStaleMs`.
   * @throws ShardingMismatchError when the directory was created for another sharding.
   * @throws the directory's own errors when it cannot be read.
   * @example
   * ```ts
   * import { ShardHomes, type ShardDirectory, type Sharding } from '@shardflake/core'
   * declare const sharding: Sharding
   * declare const directory: ShardDirectory
   *
   * const homes = await ShardHomes.open({ sharding, servers: { a: 'A', b: 'B' }, directory })
   * ```
   */
  static async open<H>(options: ShardHomesOptions<H>): Promise<ShardHomes<H>> {
    checkKnownOptions('ShardHomes.open options', options, OPTIONS)
    const sharding = requireSharding(options.sharding, 'ShardHomes')
    const { servers } = options
    if (typeof servers !== 'object' || servers === null || Array.isArray(servers)) {
      throw new InvalidArgumentError(
        `ShardHomes needs servers: an object of every server's handle by name ({ a: poolA, b: poolB }), got ${describeValue(servers)}.`,
      )
    }
    const handles = new Map<string, H>()
    for (const [name, handle] of Object.entries(servers)) {
      if (handle === undefined || handle === null) {
        throw new InvalidArgumentError(`Server ${JSON.stringify(name)} has no handle.`)
      }
      handles.set(name, handle)
    }
    if (handles.size === 0) {
      throw new InvalidArgumentError('ShardHomes needs at least one server.')
    }
    const given = options.directory
    let directory: ShardDirectory
    if (given instanceof ShardMap) {
      sharding.checkSame(given.sharding, 'The shard map given as directory')
      directory = new StaticDirectory(given)
    } else if (isShardDirectory(given)) {
      directory = given
    } else {
      throw new InvalidArgumentError(
        `ShardHomes needs a directory: a ShardMap of server names, or a shard directory (PostgresShardDirectory, MysqlShardDirectory), got ${describeValue(given)}.`,
      )
    }
    const refreshMs = readDuration('refreshMs', options.refreshMs, HOMES_DEFAULTS.refreshMs, {
      min: 10,
    })
    const switchWaitMs = readDuration(
      'switchWaitMs',
      options.switchWaitMs,
      HOMES_DEFAULTS.switchWaitMs,
    )
    const homes = new ShardHomes(sharding, directory, handles, refreshMs, switchWaitMs)
    homes.reading = await homes.read()
    const { maxStaleMs } = homes.reading.snapshot
    if (refreshMs >= maxStaleMs / 2) {
      throw new ConfigurationError(
        `refreshMs (${refreshMs}) must be below half the directory's maxStaleMs (${maxStaleMs}), so that one failed read does not leave the process without a fresh one.`,
      )
    }
    homes.schedule()
    return homes
  }

  /** The last snapshot read (fresh or not). */
  get snapshot(): DirectorySnapshot {
    return this.reading.snapshot
  }

  /** The names of every server, as given in `servers`. */
  get serverNames(): string[] {
    return [...this.handles.keys()]
  }

  /**
   * The server holding a logical shard, from a fresh enough reading of the directory.
   * @throws ShardOutOfRangeError for a shard outside the logical shards, or with no home.
   * @throws DirectoryStaleError when the last reading is older than `maxStaleMs` (a new read
   * starts; retry shortly, or await {@link refresh}).
   * @example
   * ```ts
   * import type { ShardHomes } from '@shardflake/core'
   * declare const homes: ShardHomes<unknown>
   *
   * homes.serverOf(17) // 'a'
   * ```
   */
  serverOf(shard: number): string {
    return this.entryOf(this.freshReading(), shard).server
  }

  /**
   * The handle of the server holding a logical shard, for reads (writes: {@link writeHome}).
   * @throws ShardOutOfRangeError, DirectoryStaleError as {@link serverOf}.
   * @example
   * ```ts
   * import type { ShardHomes } from '@shardflake/core'
   * type Pool = { query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> } // a pg.Pool
   * declare const homes: ShardHomes<Pool>
   *
   * await homes.forShard(17).query('SELECT count(*) FROM posts')
   * ```
   */
  forShard(shard: number): H {
    return this.handleOf(this.serverOf(shard))
  }

  /**
   * The handle of the server holding the row with this ID (its shard read from the ID).
   * @throws InvalidIdError for a value that is not an ID of the layout.
   * @throws ShardOutOfRangeError, DirectoryStaleError as {@link serverOf}.
   * @example
   * ```ts
   * import type { ShardHomes } from '@shardflake/core'
   * type Pool = { query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> } // a pg.Pool
   * declare const homes: ShardHomes<Pool>
   * declare const postId: bigint
   *
   * await homes.forId(postId).query('SELECT * FROM posts WHERE id = $1', [postId])
   * ```
   */
  forId(id: IdInput): H {
    return this.forShard(this.sharding.shardOfId(id))
  }

  /**
   * The handle of the server holding a shard key's shard (`sharding.shardForKey(key)`).
   * @throws MissingShardKeyError for `null` or `undefined`.
   * @throws ShardOutOfRangeError, DirectoryStaleError as {@link serverOf}.
   * @example
   * ```ts
   * import type { ShardHomes } from '@shardflake/core'
   * type Pool = { query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> } // a pg.Pool
   * declare const homes: ShardHomes<Pool>
   *
   * await homes.forKey('acme-corp').query('SELECT * FROM tenants WHERE name = $1', ['acme-corp'])
   * ```
   */
  forKey(key: ShardKey): H {
    return this.forShard(this.sharding.shardForKey(key))
  }

  /**
   * The handle of a server by its name.
   * @throws ConfigurationError for a name not in `servers`.
   * @example
   * ```ts
   * import type { ShardHomes } from '@shardflake/core'
   * type Pool = { query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> } // a pg.Pool
   * declare const homes: ShardHomes<Pool>
   *
   * for (const [server, rows] of homes.groupByServer([3, 40], (shard) => shard)) {
   *   await homes.handleOf(server).query('SELECT 1')
   * }
   * ```
   */
  handleOf(server: string): H {
    const handle = this.handles.get(server)
    if (handle === undefined) {
      throw new ConfigurationError(
        `No server named ${describeValue(server)}: the servers are ${this.serverNames.join(', ')}.`,
      )
    }
    return handle
  }

  /**
   * Where a write to a logical shard goes. While the shard is being moved (`switching` or
   * `arriving`), waits for the move to finish, re-reading the directory, up to `switchWaitMs`.
   * A stale reading is refreshed first.
   * @throws ShardMovingError (retryable) when the shard is still moving after `switchWaitMs`.
   * @throws DirectoryStaleError (retryable) when the directory could not be read afresh.
   * @throws CancelledError when `signal` aborts.
   * @throws ShardOutOfRangeError for a shard outside the logical shards, or with no home.
   * @example
   * ```ts
   * import type { ShardHomes, Sharding } from '@shardflake/core'
   * type Pool = { query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> } // a pg.Pool
   * declare const homes: ShardHomes<Pool>
   * declare const sharding: Sharding
   * declare const postId: bigint
   *
   * const { handle } = await homes.writeHome(sharding.shardOfId(postId))
   * await handle.query('INSERT INTO posts (id, title) VALUES ($1, $2)', [postId, 'hello'])
   * ```
   */
  async writeHome(shard: number, signal?: AbortSignal): Promise<WriteHome<H>> {
    this.sharding.checkShard(shard)
    checkSignal(signal)
    throwIfCancelled(signal, 'writeHome')
    const reading = this.servingNow([shard]) ?? (await this.waitServing([shard], signal))
    const server = this.entryOf(reading, shard).server
    return { server, handle: this.handleOf(server) }
  }

  /**
   * {@link writeHome} without a promise when it has nothing to wait for: the home of a shard that
   * is not being moved, from a fresh reading; `undefined` when `writeHome` would wait (a move, a
   * stale reading). A router's single-shard write takes the home at once, with no `await`:
   * `homes.writeHomeNow(shard) ?? (await homes.writeHome(shard))`.
   * @throws CancelledError when `signal` has aborted.
   * @throws ShardOutOfRangeError for a shard outside the logical shards, or with no home.
   * @example
   * ```ts
   * import type { ShardHomes, WriteHome } from '@shardflake/core'
   * declare const homes: ShardHomes<unknown>
   *
   * const home: WriteHome<unknown> = homes.writeHomeNow(17) ?? (await homes.writeHome(17))
   * ```
   */
  writeHomeNow(shard: number, signal?: AbortSignal): WriteHome<H> | undefined {
    this.sharding.checkShard(shard)
    checkSignal(signal)
    throwIfCancelled(signal, 'writeHome')
    const reading = this.servingNow([shard])
    if (reading === undefined) return undefined
    const server = this.entryOf(reading, shard).server
    return { server, handle: this.handleOf(server) }
  }

  /**
   * Splits the rows of one write by server, for one call per server: each item goes to its
   * shard's home. Waits, like {@link writeHome}, while any of the shards is being moved.
   * @param shardOf the logical shard of an item (from its rule, or its ID).
   * @returns the items of each server, in their order, with the server's handle.
   * @throws as {@link writeHome}.
   * @example
   * ```ts
   * import type { ShardHomes, Sharding } from '@shardflake/core'
   * type Pool = { query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> } // a pg.Pool
   * declare const homes: ShardHomes<Pool>
   * declare const sharding: Sharding
   * declare const posts: { id: bigint; title: string }[]
   *
   * const groups = await homes.writeGroups(posts, (post) => sharding.shardOfId(post.id))
   * for (const [, { handle, items }] of groups) {
   *   await handle.query('INSERT INTO posts (id, title) SELECT * FROM unnest($1::bigint[], $2::text[])', [
   *     items.map((post) => post.id),
   *     items.map((post) => post.title),
   *   ])
   * }
   * ```
   */
  async writeGroups<T>(
    items: readonly T[],
    shardOf: (item: T) => number,
    signal?: AbortSignal,
  ): Promise<Map<string, WriteGroup<H, T>>> {
    const shards = this.shardsOf(items, shardOf)
    checkSignal(signal)
    throwIfCancelled(signal, 'writeGroups')
    const distinct = distinctShards(shards)
    const reading = this.servingNow(distinct) ?? (await this.waitServing(distinct, signal))
    const groups = new Map<string, WriteGroup<H, T>>()
    const itemsOf: T[][] = [] // by shard: its server's items
    for (const shard of distinct) {
      const server = this.entryOf(reading, shard).server
      let group = groups.get(server)
      if (!group) {
        group = { handle: this.handleOf(server), items: [] }
        groups.set(server, group)
      }
      itemsOf[shard] = group.items
    }
    for (let index = 0; index < items.length; index++) itemsOf[shards[index]!]!.push(items[index]!)
    return groups
  }

  /**
   * Splits items by the server holding each one's shard, from a fresh enough reading, without
   * waiting for moves (for reads; writes: {@link writeGroups}).
   * @throws ShardOutOfRangeError, DirectoryStaleError as {@link serverOf}.
   * @example
   * ```ts
   * import type { ShardHomes, Sharding } from '@shardflake/core'
   * declare const homes: ShardHomes<unknown>
   * declare const sharding: Sharding
   * declare const ids: bigint[]
   *
   * homes.groupByServer(ids, (id) => sharding.shardOfId(id)) // Map { 'a' => [...], 'b' => [...] }
   * ```
   */
  groupByServer<T>(items: readonly T[], shardOf: (item: T) => number): Map<string, T[]> {
    const shards = this.shardsOf(items, shardOf)
    const reading = this.freshReading()
    const groups = new Map<string, T[]>()
    items.forEach((item, index) => {
      const server = this.entryOf(reading, shards[index]!).server
      let group = groups.get(server)
      if (!group) {
        group = []
        groups.set(server, group)
      }
      group.push(item)
    })
    return groups
  }

  /**
   * Throws unless `server` is the home of `shard`: the guard an adapter runs before writing a
   * row through one server's handle, whatever path wrote it.
   * @throws WrongServerError when the shard's home is another server.
   * @throws ShardOutOfRangeError, DirectoryStaleError as {@link serverOf}.
   * @example
   * ```ts
   * import type { ShardHomes } from '@shardflake/core'
   * declare const homes: ShardHomes<unknown>
   *
   * homes.checkHome('a', 17) // passes when shard 17 lives on a; WrongServerError otherwise
   * ```
   */
  checkHome(server: string, shard: number): void {
    const home = this.serverOf(shard)
    if (home !== server) {
      throw new WrongServerError(
        `A row of logical shard ${shard} was about to be written through server ${describeValue(server)}, but its home is server ${describeValue(home)}. Nothing was written: write it through the handle the router gives for its shard (homes.writeHome).`,
      )
    }
  }

  /**
   * Runs a query on every server (or on the servers holding `options.shards`), at most
   * `concurrency` at once, and merges the rows: with `orderBy` (the row's ID) a k-way merge of
   * the per-server results, each already in `order`, stopping at `limit`. Each server is told
   * the shards it is asked about; rows of other shards it returns (old copies of a moved shard)
   * are dropped. Nothing else ever queries more than one server.
   * @returns the merged rows.
   * @throws FanOutError when a server's query failed: `results` holds the merged rows of the
   * servers that answered, `failures` the errors.
   * @throws ConfigurationError when a server returned a full `limit` including rows of other
   * shards, so rows of its own may be missing: restrict the query to the shards it is given.
   * @throws CancelledError when `signal` aborts; InvalidArgumentError for options that are not valid.
   * @example
   * ```ts
   * import type { ShardHomes } from '@shardflake/core'
   * type Pool = { query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> } // a pg.Pool
   * declare const homes: ShardHomes<Pool>
   *
   * // The 20 newest posts of every server: IDs grow with time.
   * const newest = await homes.fanOut(
   *   async (pool, server, shards) =>
   *     (
   *       await pool.query(
   *         'SELECT id::text, title FROM posts WHERE (id >> 10) & 8191 = ANY($1) ORDER BY id DESC LIMIT 20',
   *         [shards],
   *       )
   *     ).rows as { id: string; title: string }[],
   *   { orderBy: (post) => post.id, order: 'desc', limit: 20 },
   * )
   * ```
   */
  async fanOut<R>(run: FanOutRun<H, R>, options?: FanOutOptions<R>): Promise<R[]> {
    const checked = checkFanOut(run, options)
    const reading = await this.freshReadingFor(checked.signal)
    const wanted =
      checked.shards === undefined ? undefined : readShardList(checked.shards, this.sharding)
    const byServer = new Map<string, number[]>()
    const add = (server: string, shard: number) => {
      let shards = byServer.get(server)
      if (!shards) {
        shards = []
        byServer.set(server, shards)
      }
      shards.push(shard)
    }
    if (wanted) {
      for (const shard of wanted) add(this.entryOf(reading, shard).server, shard)
    } else {
      for (const entry of reading.snapshot.entries) {
        for (let shard = entry.from; shard <= entry.to; shard++) add(entry.server, shard)
      }
    }
    const steps: FanOutStep<H>[] = [...byServer].map(([server, shards]) => ({
      server,
      handle: this.handleOf(server),
      shards: Object.freeze(shards),
    }))
    return runFanOut(this.sharding, steps, run, checked)
  }

  /**
   * Reads the directory now (a read already under way, if it was sent after this call began),
   * and routes by it from then on.
   * @returns the snapshot read.
   * @throws the directory's errors; CancelledError when `signal` aborts.
   * @example
   * ```ts
   * import type { ShardHomes } from '@shardflake/core'
   * declare const homes: ShardHomes<unknown>
   *
   * await homes.refresh() // after changing the directory in this process
   * ```
   */
  async refresh(signal?: AbortSignal): Promise<DirectorySnapshot> {
    this.checkOpen()
    checkSignal(signal)
    const calledAt = performance.now()
    for (;;) {
      const current = this.inFlight
      if (current && current.sentAt >= calledAt) {
        return (await untilAborted(current.promise, signal)).snapshot
      }
      if (!current) return (await untilAborted(this.startRead(), signal)).snapshot
      await untilAborted(
        current.promise.catch(() => undefined),
        signal,
      )
    }
  }

  /**
   * Stops reading the directory; routing afterwards is refused. The directory and the handles
   * stay open: close them yourself.
   * @example
   * ```ts
   * import type { ShardHomes } from '@shardflake/core'
   * declare const homes: ShardHomes<unknown>
   *
   * await homes.close()
   * ```
   */
  async close(): Promise<void> {
    this.closed = true
    clearTimeout(this.timer)
    await this.inFlight?.promise.catch(() => undefined)
  }

  /** Reads and checks the directory, not yet adopting the result. */
  private async read(signal?: AbortSignal): Promise<Reading> {
    const sentAt = performance.now()
    const sentAtWall = Date.now()
    const snapshot = await this.directory.read(signal)
    return this.check(snapshot, sentAt, sentAtWall)
  }

  /** A snapshot's checks: the sharding, the entries, and every server known here. */
  private check(snapshot: DirectorySnapshot, sentAt: number, sentAtWall: number): Reading {
    if (typeof snapshot !== 'object' || snapshot === null || !Array.isArray(snapshot.entries)) {
      throw new ConfigurationError(
        `The shard directory returned ${describeValue(snapshot)}, not a snapshot.`,
      )
    }
    this.sharding.checkSame(snapshot.sharding, 'The shard directory')
    if (typeof snapshot.maxStaleMs !== 'number' || !(snapshot.maxStaleMs > 0)) {
      throw new ConfigurationError(
        `The shard directory returned maxStaleMs ${describeValue(snapshot.maxStaleMs)}.`,
      )
    }
    let entries: DirectoryEntry[]
    try {
      entries = checkDirectoryEntries(this.sharding, snapshot.entries)
    } catch (error) {
      throw new ConfigurationError(
        `The shard directory returned entries that are not a shard map: ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      )
    }
    const homes = new ShardMap(
      this.sharding,
      entries.map((entry) => ({ from: entry.from, to: entry.to, target: entry })),
    )
    for (const entry of entries) {
      if (!this.handles.has(entry.server)) {
        throw new ConfigurationError(
          `The shard directory puts shards ${entry.from}-${entry.to} on server ${describeValue(entry.server)}, which is not among this process's servers (${this.serverNames.join(', ')}). Give every process a handle for every server the directory names before a move uses it.`,
        )
      }
    }
    return { snapshot, homes, sentAt, sentAtWall, byShard: new Map() }
  }

  /** Starts a read shared by every caller until it settles, and adopts its result. */
  private startRead(): Promise<Reading> {
    const sentAt = performance.now()
    const promise = this.read()
      .then((reading) => {
        const current = this.reading
        if (reading.snapshot.version < current.snapshot.version) {
          throw new ConfigurationError(
            `The shard directory went back from version ${current.snapshot.version} to ${reading.snapshot.version}: read it from the primary server, never from a replica that may lag.`,
          )
        }
        if (reading.sentAt >= current.sentAt) this.reading = reading
        this.lastFailure = undefined
        return reading
      })
      .catch((error: unknown) => {
        this.lastFailure = error
        throw error
      })
    const flight = { promise, sentAt }
    this.inFlight = flight
    const clear = () => {
      if (this.inFlight === flight) this.inFlight = undefined
    }
    promise.then(clear, clear)
    // The failure is kept in lastFailure; whoever awaits the promise sees it too.
    promise.catch(() => undefined)
    return promise
  }

  /** Reads again every `refreshMs` while open (never for a directory that cannot change). */
  private schedule(): void {
    if (this.closed || this.reading.snapshot.maxStaleMs === Number.POSITIVE_INFINITY) return
    this.timer = setTimeout(() => {
      const read = this.inFlight?.promise ?? this.startRead()
      read.catch(() => undefined).finally(() => this.schedule())
    }, this.refreshMs)
    this.timer.unref?.()
  }

  /** How old a reading is, from when its read was sent: the older of the two clocks' answers. */
  private ageOf(reading: Reading): number {
    return Math.max(performance.now() - reading.sentAt, Date.now() - reading.sentAtWall)
  }

  private isFresh(reading: Reading): boolean {
    return this.ageOf(reading) < reading.snapshot.maxStaleMs
  }

  /** The current reading if fresh; otherwise starts a read and throws DirectoryStaleError. */
  private freshReading(): Reading {
    this.checkOpen()
    const reading = this.reading
    if (reading === this.freshThisTurn) return reading
    const age = this.ageOf(reading)
    if (age < reading.snapshot.maxStaleMs) {
      if (age < reading.snapshot.maxStaleMs / 2 && this.freshThisTurn === undefined) {
        this.freshThisTurn = reading
        // Forgotten at the next microtask (a resolved promise's: queueMicrotask costs more).
        RESOLVED.then(this.endTurn)
      }
      return reading
    }
    if (!this.inFlight) this.startRead()
    throw this.staleError(reading)
  }

  /** The current reading, read again first when stale. */
  private async freshReadingFor(signal: AbortSignal | undefined): Promise<Reading> {
    this.checkOpen()
    throwIfCancelled(signal, 'the shard directory')
    if (this.isFresh(this.reading)) return this.reading
    try {
      await untilAborted(this.inFlight?.promise ?? this.startRead(), signal)
    } catch (error) {
      if (error instanceof CancelledError) throw error
    }
    if (this.isFresh(this.reading)) return this.reading
    throw this.staleError(this.reading)
  }

  /** The current reading when it is fresh and serves every one of `shards` (no wait needed). */
  private servingNow(shards: readonly number[]): Reading | undefined {
    const reading = this.reading
    if (this.closed || !this.isFresh(reading)) return undefined
    for (const shard of shards) {
      if (this.entryOf(reading, shard).state !== 'serving') return undefined
    }
    return reading
  }

  /** Waits until every one of `shards` is `serving` in one fresh reading, up to `switchWaitMs`. */
  private async waitServing(shards: readonly number[], signal?: AbortSignal): Promise<Reading> {
    const deadline = performance.now() + this.switchWaitMs
    for (;;) {
      const reading = await this.freshReadingFor(signal)
      const moving = shards
        .map((shard) => ({ shard, entry: this.entryOf(reading, shard) }))
        .find(({ entry }) => entry.state !== 'serving')
      if (!moving) return reading
      const remaining = deadline - performance.now()
      if (remaining <= 0) {
        throw new ShardMovingError(
          moving.shard,
          `Logical shard ${moving.shard} is being moved (${moving.entry.state} on server ${moving.entry.server}) and was still moving after ${this.switchWaitMs} ms (switchWaitMs). Nothing was written; retry shortly: a switch takes a few seconds.`,
        )
      }
      await pause(Math.min(WAIT_POLL_MS, this.refreshMs, remaining), signal)
      try {
        await this.refresh(signal)
      } catch (error) {
        if (error instanceof CancelledError) throw error
      }
    }
  }

  private entryOf(reading: Reading, shard: number): DirectoryEntry {
    const known = reading.byShard.get(shard)
    if (known !== undefined) return known
    this.sharding.checkShard(shard)
    if (!reading.homes.has(shard)) {
      throw new ShardOutOfRangeError(
        shard,
        `Logical shard ${shard} has no home in the shard directory (it places ${formatShardList(reading.homes.shards())}): add it to the directory before using it.`,
      )
    }
    const entry = reading.homes.targetFor(shard)
    reading.byShard.set(shard, entry)
    return entry
  }

  private shardsOf<T>(items: readonly T[], shardOf: (item: T) => number): number[] {
    if (!Array.isArray(items)) {
      throw new InvalidArgumentError(`Expected an array of items, got ${describeValue(items)}.`)
    }
    if (typeof shardOf !== 'function') {
      throw new InvalidArgumentError(
        `Expected a function giving each item's logical shard, got ${describeValue(shardOf)}.`,
      )
    }
    return items.map((item) => this.sharding.checkShard(shardOf(item)))
  }

  private staleError(reading: Reading): DirectoryStaleError {
    const age = Math.round(this.ageOf(reading))
    const failure = this.lastFailure
    const why =
      failure === undefined
        ? 'A new read is under way: retry shortly.'
        : `Its last read failed (${failure instanceof Error ? failure.message : String(failure)}); it is read again in the background.`
    return new DirectoryStaleError(
      `The shard directory was last read ${age} ms ago, longer than its maxStaleMs (${reading.snapshot.maxStaleMs}): a move may have changed where shards live since, so nothing was routed. ${why}`,
      failure === undefined ? undefined : { cause: failure },
    )
  }

  private checkOpen(): void {
    if (this.closed) {
      throw new ConfigurationError('These ShardHomes are closed: open new ones to route.')
    }
  }
}

/** @throws InvalidArgumentError unless `signal` is undefined or an AbortSignal. */
function checkSignal(signal: unknown): void {
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new InvalidArgumentError(`signal must be an AbortSignal, got ${describeValue(signal)}.`)
  }
}

/** Waits for `promise`, or fails with `CancelledError` as soon as `signal` aborts. */
async function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise
  throwIfCancelled(signal, 'the shard directory')
  let onAbort: (() => void) | undefined
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        onAbort = () =>
          reject(
            new CancelledError('The wait for the shard directory was cancelled by the caller.', {
              cause: signal.reason,
            }),
          )
        signal.addEventListener('abort', onAbort, { once: true })
      }),
    ])
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort)
  }
}

/** Sleeps `ms`, or fails with `CancelledError` as soon as `signal` aborts. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return untilAborted(new Promise<void>((resolve) => setTimeout(resolve, ms)), signal)
}
