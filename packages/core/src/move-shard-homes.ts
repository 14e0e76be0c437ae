import { createHash } from 'node:crypto'
import { throwIfCancelled } from './deadline'
import {
  CancelledError,
  ConfigurationError,
  DirectoryChangedError,
  InvalidArgumentError,
  RowsMismatchError,
} from './errors'
import { checkIdentifier } from './identifier'
import { checkKnownOptions, describeValue } from './known-options'
import type { Layout } from './layout'
import type {
  DirectoryEntry,
  DirectorySnapshot,
  HomeState,
  ShardDirectory,
} from './shard-directory'
import { isShardDirectory } from './shard-directory'
import { formatShardList, readShardList, type ShardList } from './shard-map'
import { requireSharding, type Sharding } from './sharding'

/**
 * A sharded table as a move sees it: its name (`table` or `schema.table`) and the column holding
 * the row's ID, whose shard bits say which logical shard the row belongs to. Co-located children
 * (comments of a post, whose IDs carry the post's shard) are just more tables.
 * @example
 * ```ts
 * import type { MovedTable } from '@shardflake/core'
 *
 * const tables: MovedTable[] = [{ name: 'posts' }, { name: 'comments', idColumn: 'id' }]
 * ```
 */
export interface MovedTable {
  /** `table` or `schema.table`: plain identifiers (`a-z`, `0-9`, `_`). */
  readonly name: string
  /**
   * The ID column: a 64-bit integer with a primary key or unique index of its own.
   * @default 'id'
   */
  readonly idColumn?: string
}

/** Which rows a {@link RowStore} call is about: those whose ID carries one of `shards`. */
export interface RowRange {
  /** The logical shards, ascending. */
  readonly shards: readonly number[]
  /** The shard field of an ID: `(id >> shift) & mask`. */
  readonly shift: number
  readonly mask: number
  /** Only IDs above this one (keyset paging). */
  readonly after?: bigint | undefined
  /** Only IDs up to this one, inclusive. */
  readonly upTo?: bigint | undefined
  /** At most this many rows (every row in the range when left out). */
  readonly limit?: number | undefined
}

/**
 * One row as a {@link RowStore} reads it: its ID and its whole content as text, the same text on
 * every server of the dialect for the same values (it is compared between servers and written
 * back by the same store).
 */
export interface StoredRow {
  readonly id: bigint
  readonly content: string
}

/**
 * The rows of one database server, for {@link moveShardHomes}: reads rows of some logical shards
 * in ID order, and writes and deletes them. The dialects supply it: `postgresRowStore(pool)`
 * (`@shardflake/postgres`), `mysqlRowStore(pool)` (`@shardflake/mysql`).
 * @example
 * ```ts
 * import type { RowStore } from '@shardflake/core'
 * declare const store: RowStore
 *
 * const rows = await store.readRows({ name: 'posts' }, { shards: [16], shift: 10, mask: 8191, limit: 100 })
 * ```
 */
export interface RowStore {
  /**
   * Checks that the table exists with its ID column (unique) on this server.
   * @throws ConfigurationError when it does not.
   */
  checkTable(table: MovedTable, signal?: AbortSignal): Promise<void>
  /** The rows of `range`, in ascending ID order. */
  readRows(table: MovedTable, range: RowRange, signal?: AbortSignal): Promise<StoredRow[]>
  /**
   * Writes rows read by the same kind of store: `'missing'` inserts those whose ID is not there
   * (and leaves the others as they are), `'replace'` inserts or overwrites.
   */
  writeRows(
    table: MovedTable,
    rows: readonly StoredRow[],
    mode: 'missing' | 'replace',
    signal?: AbortSignal,
  ): Promise<void>
  /** Deletes the rows with these IDs. */
  deleteRows(table: MovedTable, ids: readonly bigint[], signal?: AbortSignal): Promise<void>
  /** Deletes at most `range.limit` rows of `range`, and returns how many it deleted. */
  deleteRange(table: MovedTable, range: RowRange, signal?: AbortSignal): Promise<number>
}

/** Where a move of rows stands, reported to `onProgress` (and awaited). */
export interface RowMoveProgress {
  /**
   * - `copying`: a page of rows was copied to the target (the shards still serve on the source);
   * - `switching`: writes to the shards now wait; the move waits `maxStaleMs`;
   * - `reconciling`: the target is made equal to the source, table by table (writes wait);
   * - `verifying`: counts and checksums are compared between the two servers (writes wait);
   * - `arriving`: the target answers reads; the move waits `maxStaleMs`;
   * - `serving`: the target is the shards' home; writes go there;
   * - `deleting`: a page of old copies was deleted (from the source after a move, from the target
   *   on abort).
   */
  readonly phase:
    | 'copying'
    | 'switching'
    | 'reconciling'
    | 'verifying'
    | 'arriving'
    | 'serving'
    | 'deleting'
  /** The table of the step, when it is about one. */
  readonly table?: string
  /** Rows of that table handled so far in this phase. */
  readonly rows?: number
}

/** What one table went through in a move. */
export interface MovedTableReport {
  readonly table: string
  /** Rows copied before the switch (inserted when missing on the target). */
  readonly copied: number
  /** Rows written while switching: added or changed on the source during the copy. */
  readonly repaired: number
  /** Rows deleted from the target while switching (deleted on the source during the copy). */
  readonly removed: number
  /** Rows of the moved shards on the target once verified. */
  readonly rows: number
}

/** What {@link moveShardHomes} did. */
export interface ShardHomesMoveResult {
  /** The logical shards moved, ascending. */
  readonly shards: readonly number[]
  /** The server they left (unknown when the call found the move past its switch and no `from` was given). */
  readonly from: string | undefined
  readonly to: string
  /**
   * Where the call found the move: `'start'` (serving on the source), `'switching'`,
   * `'arriving'` (a move stopped half-way and resumed), `'done'` (nothing left to do but, maybe,
   * deleting old copies).
   */
  readonly resumedFrom: 'start' | 'switching' | 'arriving' | 'done'
  readonly tables: readonly MovedTableReport[]
  /** How long writes to the shards waited, from the switch to `serving` on the target, in ms. */
  readonly switchMs: number
  /** Old copies deleted from the source (`deleteOldCopies`). */
  readonly oldCopiesDeleted: number
}

/** What {@link moveShardHomes} takes. */
export interface MoveShardHomesOptions {
  /** The application's sharding. */
  readonly sharding: Sharding
  /** The directory every process routes by (`PostgresShardDirectory`, `MysqlShardDirectory`). */
  readonly directory: ShardDirectory
  /** Every server the move touches, by the name the directory uses, with its row store. */
  readonly servers: Readonly<Record<string, RowStore>>
  /** The logical shards to move: a list, a `{ from, to }` range or a `"16-31"` string. */
  readonly shards: ShardList
  /** The server they move to. */
  readonly to: string
  /**
   * The server they move from. Read from the directory when left out; given, it must match
   * (needed only to delete old copies of a move found past its switch).
   */
  readonly from?: string
  /** The sharded tables, parents before children (copied in this order, deleted in reverse). */
  readonly tables: readonly (MovedTable | string)[]
  /**
   * Rows per page read, written and compared.
   * @default 1000
   */
  readonly batchSize?: number
  /**
   * Delete the rows of the moved shards from the source once the target serves them. Left false,
   * they stay as old copies that nothing routes to (fan-out reads drop them); delete them later
   * with {@link deleteMovedRows}.
   * @default false
   */
  readonly deleteOldCopies?: boolean
  /**
   * Moves ID generation while writes wait, for IDs issued by the servers (`PostgresSource`,
   * `MysqlSource`): call `movePostgresShards`/`moveMysqlShards` here. In-process IDs need none.
   */
  readonly moveIds?: (move: {
    shards: readonly number[]
    from: string
    to: string
    signal: AbortSignal | undefined
  }) => Promise<unknown>
  readonly signal?: AbortSignal
  /** Called at each step; the move waits for what it returns. */
  readonly onProgress?: (progress: RowMoveProgress) => void | Promise<void>
}

/** What {@link abortShardHomesMove} and {@link deleteMovedRows} take. */
export interface ShardRowsOptions {
  readonly sharding: Sharding
  readonly directory: ShardDirectory
  readonly servers: Readonly<Record<string, RowStore>>
  readonly shards: ShardList
  /** The server the shards were moving from (abort), or left (delete old copies). */
  readonly from: string
  /** The server they were moving to. */
  readonly to: string
  readonly tables: readonly (MovedTable | string)[]
  /** @default 1000 */
  readonly batchSize?: number
  readonly signal?: AbortSignal
  readonly onProgress?: (progress: RowMoveProgress) => void | Promise<void>
}

const MOVE_OPTIONS = [
  'sharding',
  'directory',
  'servers',
  'shards',
  'to',
  'from',
  'tables',
  'batchSize',
  'deleteOldCopies',
  'moveIds',
  'signal',
  'onProgress',
]
const ROWS_OPTIONS = [
  'sharding',
  'directory',
  'servers',
  'shards',
  'from',
  'to',
  'tables',
  'batchSize',
  'signal',
  'onProgress',
]
const TABLE_KEYS = ['name', 'idColumn']
/** How often a compare-and-set lost to another process is tried again. */
const CAS_ATTEMPTS = 5
/** Passes of the copy before the switch: each copies the rows that arrived during the last. */
const COPY_PASSES = 4

/** The options, checked. */
interface Checked {
  sharding: Sharding
  directory: ShardDirectory
  servers: ReadonlyMap<string, RowStore>
  shards: number[]
  to: string
  from: string | undefined
  tables: MovedTable[]
  batchSize: number
  signal: AbortSignal | undefined
  onProgress: (progress: RowMoveProgress) => Promise<void>
  shift: number
  mask: number
}

/**
 * Moves logical shards to another server **with their rows**, while the application keeps
 * running on `ShardHomes` over the same directory:
 *
 * 1. **Copy** (the shards still serve on the source): every row whose ID carries a moving shard
 *    is copied to the target in ID order, a page at a time, inserted only where missing (a copy
 *    run again skips what is there). Rows keep arriving ahead of the copy on busy shards: it goes
 *    in up to four passes, each taking what arrived during the one before (a pass no shorter
 *    than the one before ends the copy), and leaves the rest to the switch.
 * 2. **Switch**: the shards become `switching` (a compare-and-set); the move waits the
 *    directory's `maxStaleMs`, after which every process makes writes to them wait (reads still
 *    go to the source). Then it **reconciles**: rows are read from both servers in ID order, page
 *    by page; rows that changed during the copy are written again, rows deleted during it are
 *    deleted from the target. Then it **verifies**: the count and a SHA-256 checksum of every
 *    table's rows, read again from both sides, must match; otherwise the shards go back to
 *    `serving` on the source and the move fails with `RowsMismatchError` (nothing switched).
 * 3. `moveIds`, when IDs come from the servers, moves ID generation in this window.
 * 4. **Flip**: the shards become `arriving` on the target (reads go there), the move waits
 *    `maxStaleMs`, then `serving`: writes go to the target.
 * 5. The rows stay on the source as old copies unless `deleteOldCopies` (or
 *    {@link deleteMovedRows} later): nothing routes to them, and `ShardHomes.fanOut` drops them.
 *
 * The directory is the record of the move: a move stopped half-way (its process killed) is
 * resumed by the same call, which reads where the shards stand, or undone by
 * {@link abortShardHomesMove}. Writes wait from the switch to `serving` (`ShardHomes`'
 * `switchWaitMs`, then a retryable `ShardMovingError`); keep `switchWaitMs` above the switch
 * (reported as `switchMs`), which grows with the rows moved.
 *
 * The guarantee rests on `maxStaleMs`: a write routed before the switch must be done within
 * `maxStaleMs` of the directory read it was routed by. Give writes a statement timeout below it.
 * Every row's ID must carry its shard; rows are written with their columns' values (generated
 * columns excepted), so the target's tables must have the same columns.
 *
 * @returns what was moved, and how long writes waited.
 * @throws InvalidArgumentError, InvalidIdentifierError for options that are not valid, before
 * anything is written.
 * @throws ConfigurationError for a server missing from `servers`, shards not all on one source
 * server, a target that is the source, a table or ID column missing on a server.
 * @throws RowsMismatchError when the verification found the servers different (the shards serve
 * on the source again).
 * @throws CancelledError when `signal` aborts (run the same call again, or abort the move).
 * @example
 * ```ts
 * import { moveShardHomes, type RowStore, type ShardDirectory, type Sharding } from '@shardflake/core'
 * declare const sharding: Sharding
 * declare const directory: ShardDirectory
 * declare const a: RowStore, c: RowStore // postgresRowStore(poolA), postgresRowStore(poolC)
 *
 * const result = await moveShardHomes({
 *   sharding,
 *   directory,
 *   servers: { a, c },
 *   shards: '16-31',
 *   to: 'c',
 *   tables: ['posts', 'comments'],
 * })
 * console.log(`writes waited ${result.switchMs} ms`)
 * ```
 */
export async function moveShardHomes(
  options: MoveShardHomesOptions,
): Promise<ShardHomesMoveResult> {
  checkKnownOptions('moveShardHomes options', options, MOVE_OPTIONS)
  const checked = checkOptions(options, options.from)
  const deleteOldCopies = readBoolean('deleteOldCopies', options.deleteOldCopies)
  const { moveIds } = options
  if (moveIds !== undefined && typeof moveIds !== 'function') {
    throw new InvalidArgumentError(
      `moveIds must be a function moving ID generation, got ${describeValue(moveIds)}.`,
    )
  }
  const { directory, shards, to, tables, signal, onProgress } = checked
  let snapshot = await directory.read(signal)
  const stand = standing(snapshot, checked)
  if (stand.phase === 'done' && checked.from === undefined) {
    throw new ConfigurationError(
      `Logical shards ${formatShardList(shards)} already serve on server ${JSON.stringify(to)}: nothing to move (give from, the server they left, to finish a move that got that far).`,
    )
  }
  const from = stand.from ?? checked.from
  if (deleteOldCopies && from === undefined) {
    throw new ConfigurationError(
      `Logical shards ${formatShardList(shards)} are already on server ${JSON.stringify(to)}: give from (the server they left) to delete their old copies.`,
    )
  }
  const source = from === undefined ? undefined : storeOf(checked, from)
  const target = storeOf(checked, to)
  for (const table of tables) {
    if (source) await source.checkTable(table, signal)
    await target.checkTable(table, signal)
  }
  const reports = new Map(
    tables.map((table) => [
      table.name,
      { table: table.name, copied: 0, repaired: 0, removed: 0, rows: 0 },
    ]),
  )
  let switchedAt: number | undefined
  const resumedFrom = stand.phase
  if (stand.phase === 'start' || stand.phase === 'switching') {
    const src = source!
    if (stand.phase === 'start') {
      for (const table of tables) {
        reports.get(table.name)!.copied = await copyRows(checked, src, target, table)
      }
      snapshot = await setState(checked, snapshot, from!, 'serving', from!, 'switching')
    }
    switchedAt = performance.now()
    await onProgress({ phase: 'switching' })
    await wait(snapshot.maxStaleMs, signal)
    await reconcile(checked, src, target, reports)
    const mismatch = await verify(checked, src, target, reports)
    if (mismatch) {
      await setState(checked, snapshot, from!, 'switching', from!, 'serving').catch(() => undefined)
      throw mismatch
    }
    if (moveIds) await moveIds({ shards, from: from!, to, signal })
    snapshot = await setState(checked, snapshot, from!, 'switching', to, 'arriving')
    await onProgress({ phase: 'arriving' })
    await wait(snapshot.maxStaleMs, signal)
  }
  if (stand.phase === 'arriving') {
    // The process that set `arriving` may have stopped at once: let every process see it first.
    switchedAt = performance.now()
    await wait(snapshot.maxStaleMs, signal)
  }
  if (stand.phase !== 'done') {
    snapshot = await setState(checked, snapshot, to, 'arriving', to, 'serving')
    await onProgress({ phase: 'serving' })
  }
  const switchMs = switchedAt === undefined ? 0 : Math.round(performance.now() - switchedAt)
  let oldCopiesDeleted = 0
  if (deleteOldCopies) oldCopiesDeleted = await deleteCopies(checked, source!)
  return {
    shards,
    from,
    to,
    resumedFrom,
    tables: [...reports.values()],
    switchMs,
    oldCopiesDeleted,
  }
}

/**
 * Undoes a move of rows stopped half-way (its process killed, or cancelled): the shards serve on
 * the source again (from `switching`, at once; from `arriving`, back through `switching` with a
 * wait of `maxStaleMs`), and their partial copies are deleted from the target. Nothing written
 * through `ShardHomes` is lost: writes waited while the shards were moving.
 * @returns how many partial copies were deleted from the target.
 * @throws ConfigurationError when the shards already serve on the target (the move finished: move
 * them back instead), or are not on `from` or `to`; as {@link moveShardHomes} for bad options.
 * @example
 * ```ts
 * import { abortShardHomesMove, type RowStore, type ShardDirectory, type Sharding } from '@shardflake/core'
 * declare const sharding: Sharding
 * declare const directory: ShardDirectory
 * declare const a: RowStore, c: RowStore
 *
 * await abortShardHomesMove({ sharding, directory, servers: { a, c }, shards: '16-31', from: 'a', to: 'c', tables: ['posts'] })
 * ```
 */
export async function abortShardHomesMove(options: ShardRowsOptions): Promise<number> {
  checkKnownOptions('abortShardHomesMove options', options, ROWS_OPTIONS)
  const checked = checkOptions(options, options.from)
  const { directory, signal, tables } = checked
  const from = checked.from!
  let snapshot = await directory.read(signal)
  const stand = standing(snapshot, checked)
  if (stand.phase === 'done') {
    throw new ConfigurationError(
      `Logical shards ${formatShardList(checked.shards)} already serve on server ${JSON.stringify(checked.to)}: the move finished and writes may have landed there. Move them back instead of aborting.`,
    )
  }
  const target = storeOf(checked, checked.to)
  for (const table of tables) await target.checkTable(table, signal)
  if (stand.phase === 'arriving') {
    snapshot = await setState(checked, snapshot, checked.to, 'arriving', from, 'switching')
    await checked.onProgress({ phase: 'switching' })
    await wait(snapshot.maxStaleMs, signal)
  }
  if (stand.phase !== 'start') {
    snapshot = await setState(checked, snapshot, from, 'switching', from, 'serving')
    await checked.onProgress({ phase: 'serving' })
  }
  return deleteCopies(checked, target)
}

/**
 * Deletes the old copies a move left on the server the shards moved from (`from`), once they
 * serve on `to`.
 * @returns how many rows were deleted.
 * @throws ConfigurationError unless every one of the shards is `serving` on `to`.
 * @example
 * ```ts
 * import { deleteMovedRows, type RowStore, type ShardDirectory, type Sharding } from '@shardflake/core'
 * declare const sharding: Sharding
 * declare const directory: ShardDirectory
 * declare const a: RowStore, c: RowStore
 *
 * await deleteMovedRows({ sharding, directory, servers: { a, c }, shards: '16-31', from: 'a', to: 'c', tables: ['posts'] })
 * ```
 */
export async function deleteMovedRows(options: ShardRowsOptions): Promise<number> {
  checkKnownOptions('deleteMovedRows options', options, ROWS_OPTIONS)
  const checked = checkOptions(options, options.from)
  const snapshot = await checked.directory.read(checked.signal)
  if (standing(snapshot, checked).phase !== 'done') {
    throw new ConfigurationError(
      `Logical shards ${formatShardList(checked.shards)} do not all serve on server ${JSON.stringify(checked.to)} yet: their rows on ${JSON.stringify(checked.from)} are not old copies. Finish the move first.`,
    )
  }
  const source = storeOf(checked, checked.from!)
  for (const table of checked.tables) await source.checkTable(table, checked.signal)
  return deleteCopies(checked, source)
}

function checkOptions(
  options: Partial<MoveShardHomesOptions> | Partial<ShardRowsOptions>,
  from: unknown,
): Checked {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError(`Expected move options, got ${describeValue(options)}.`)
  }
  const sharding = requireSharding(options.sharding, 'A move of rows')
  if (!isShardDirectory(options.directory)) {
    throw new InvalidArgumentError(
      `A move of rows needs the shard directory every process routes by (PostgresShardDirectory, MysqlShardDirectory), got ${describeValue(options.directory)}.`,
    )
  }
  const given = options.servers
  if (typeof given !== 'object' || given === null || Array.isArray(given)) {
    throw new InvalidArgumentError(
      `A move of rows needs servers: each server's row store by name ({ a: postgresRowStore(poolA), c: postgresRowStore(poolC) }), got ${describeValue(given)}.`,
    )
  }
  const servers = new Map<string, RowStore>()
  for (const [name, store] of Object.entries(given)) {
    if (!isRowStore(store)) {
      throw new InvalidArgumentError(
        `Server ${JSON.stringify(name)} needs a row store (postgresRowStore(pool), mysqlRowStore(pool)), got ${describeValue(store)}.`,
      )
    }
    servers.set(name, store)
  }
  const shards = readShardList(options.shards as ShardList, sharding)
  const to = options.to
  if (typeof to !== 'string' || !servers.has(to)) {
    throw new ConfigurationError(
      `to must name one of the servers (${[...servers.keys()].join(', ')}), got ${describeValue(to)}.`,
    )
  }
  if (from !== undefined) {
    if (typeof from !== 'string' || !servers.has(from)) {
      throw new ConfigurationError(
        `from must name one of the servers (${[...servers.keys()].join(', ')}), got ${describeValue(from)}.`,
      )
    }
    if (from === to) {
      throw new ConfigurationError(
        `from and to are the same server (${JSON.stringify(to)}): logical shards move from one server to another.`,
      )
    }
  }
  if (!Array.isArray(options.tables) || options.tables.length === 0) {
    throw new InvalidArgumentError(
      `tables must list the sharded tables to move, parents first (['posts', 'comments']), got ${describeValue(options.tables)}.`,
    )
  }
  const tables = options.tables.map((table: unknown) => readTable(table))
  const names = new Set(tables.map((table) => table.name))
  if (names.size !== tables.length) {
    throw new InvalidArgumentError('tables lists a table twice.')
  }
  const batchSize = options.batchSize ?? 1000
  if (!Number.isSafeInteger(batchSize) || batchSize < 1 || batchSize > 100_000) {
    throw new InvalidArgumentError(
      `batchSize must be a whole number of rows from 1 to 100000, got ${describeValue(batchSize)}.`,
    )
  }
  const { signal, onProgress } = options
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new InvalidArgumentError(`signal must be an AbortSignal, got ${describeValue(signal)}.`)
  }
  if (onProgress !== undefined && typeof onProgress !== 'function') {
    throw new InvalidArgumentError(
      `onProgress must be a function, got ${describeValue(onProgress)}.`,
    )
  }
  const { layout } = sharding
  return {
    sharding,
    directory: options.directory,
    servers,
    shards,
    to,
    from: from as string | undefined,
    tables,
    batchSize,
    signal,
    onProgress: async (progress) => {
      throwIfCancelled(signal, 'the move')
      await onProgress?.(progress)
    },
    shift: Number(layout.shifts.shard),
    mask: 2 ** layout.shardBits - 1,
  }
}

function readTable(table: unknown): MovedTable {
  if (typeof table === 'string') return readTable({ name: table })
  checkKnownOptions('A table to move', table, TABLE_KEYS)
  const { name, idColumn = 'id' } = table as { name?: unknown; idColumn?: unknown }
  if (typeof name !== 'string') {
    throw new InvalidArgumentError(
      `A table to move needs a name ('posts' or 'schema.posts'), got ${describeValue(name)}.`,
    )
  }
  const parts = name.split('.')
  if (parts.length > 2) checkIdentifier('table', name)
  for (const part of parts) checkIdentifier('table', part)
  return Object.freeze({ name, idColumn: checkIdentifier('column', idColumn) })
}

function readBoolean(name: string, value: unknown): boolean {
  if (value === undefined) return false
  if (typeof value !== 'boolean') {
    throw new InvalidArgumentError(`${name} must be true or false, got ${describeValue(value)}.`)
  }
  return value
}

function isRowStore(value: unknown): value is RowStore {
  const store = value as Partial<RowStore> | null | undefined
  return (
    typeof store === 'object' &&
    store !== null &&
    ['checkTable', 'readRows', 'writeRows', 'deleteRows', 'deleteRange'].every(
      (method) => typeof store[method as keyof RowStore] === 'function',
    )
  )
}

function storeOf(checked: Checked, server: string): RowStore {
  const store = checked.servers.get(server)
  if (!store) {
    throw new ConfigurationError(
      `The shard directory names server ${JSON.stringify(server)}, which is not among the servers given (${[...checked.servers.keys()].join(', ')}).`,
    )
  }
  return store
}

/** Where the moving shards stand in the directory, and the server they move from when known. */
function standing(
  snapshot: DirectorySnapshot,
  checked: Checked,
): { phase: ShardHomesMoveResult['resumedFrom']; from: string | undefined } {
  const found = new Set<string>()
  let server: string | undefined
  let state: HomeState | undefined
  for (const shard of checked.shards) {
    const entry = entryOf(snapshot.entries, shard)
    if (!entry) {
      throw new ConfigurationError(
        `Logical shard ${shard} has no home in the shard directory: only shards with a home can move.`,
      )
    }
    found.add(`${entry.server} (${entry.state})`)
    server = entry.server
    state = entry.state
  }
  if (found.size > 1) {
    throw new ConfigurationError(
      `Logical shards ${formatShardList(checked.shards)} are not all on one server in one state (${[...found].join(', ')}): move the shards of one server at a time, or finish the move they are in.`,
    )
  }
  const { to, from } = checked
  if (server === to) {
    if (state === 'switching') {
      throw new ConfigurationError(
        `Logical shards ${formatShardList(checked.shards)} are switching on server ${JSON.stringify(to)}, which is the target: another move is taking them away from it. Finish or abort that move first.`,
      )
    }
    return { phase: state === 'arriving' ? 'arriving' : 'done', from: undefined }
  }
  if (from !== undefined && server !== from) {
    throw new ConfigurationError(
      `Logical shards ${formatShardList(checked.shards)} are on server ${JSON.stringify(server)}, not on ${JSON.stringify(from)} (from).`,
    )
  }
  if (state === 'arriving') {
    throw new ConfigurationError(
      `Logical shards ${formatShardList(checked.shards)} are arriving on server ${JSON.stringify(server)}, not on ${JSON.stringify(to)}: another move is under way. Finish or abort it first.`,
    )
  }
  storeOf(checked, server!)
  return { phase: state === 'switching' ? 'switching' : 'start', from: server }
}

function entryOf(entries: readonly DirectoryEntry[], shard: number): DirectoryEntry | undefined {
  return entries.find((entry) => entry.from <= shard && shard <= entry.to)
}

/**
 * Puts the moving shards on `server` in `state`, when they are on `expectServer` in
 * `expectState` (a compare-and-set, tried again when another process changed other entries).
 */
async function setState(
  checked: Checked,
  snapshot: DirectorySnapshot,
  expectServer: string,
  expectState: HomeState,
  server: string,
  state: HomeState,
): Promise<DirectorySnapshot> {
  const { directory, shards, signal } = checked
  let current = snapshot
  for (let attempt = 1; ; attempt++) {
    for (const shard of shards) {
      const entry = entryOf(current.entries, shard)
      if (entry?.server !== expectServer || entry.state !== expectState) {
        throw new ConfigurationError(
          `Logical shard ${shard} was expected ${expectState} on server ${JSON.stringify(expectServer)}, but the directory now says ${entry ? `${entry.state} on ${JSON.stringify(entry.server)}` : 'no home'}: another process changed it during the move. Nothing more was changed; read the directory and resume or abort.`,
        )
      }
    }
    try {
      return await directory.compareAndSet(
        current.version,
        reassign(current.entries, shards, server, state),
        signal,
      )
    } catch (error) {
      if (!(error instanceof DirectoryChangedError) || attempt >= CAS_ATTEMPTS) throw error
      current = await directory.read(signal)
    }
  }
}

/** The entries with `shards` on `server` in `state`, neighbours of one server and state merged. */
function reassign(
  entries: readonly DirectoryEntry[],
  shards: readonly number[],
  server: string,
  state: HomeState,
): DirectoryEntry[] {
  const moving = new Set(shards)
  const homes: { shard: number; server: string; state: HomeState }[] = []
  for (const entry of entries) {
    for (let shard = entry.from; shard <= entry.to; shard++) {
      homes.push(
        moving.has(shard)
          ? { shard, server, state }
          : { shard, server: entry.server, state: entry.state },
      )
    }
  }
  homes.sort((x, y) => x.shard - y.shard)
  const merged: DirectoryEntry[] = []
  for (const home of homes) {
    const last = merged.at(-1)
    if (
      last &&
      last.to === home.shard - 1 &&
      last.server === home.server &&
      last.state === home.state
    ) {
      merged[merged.length - 1] = { ...last, to: home.shard }
    } else {
      merged.push({ from: home.shard, to: home.shard, server: home.server, state: home.state })
    }
  }
  return merged
}

function rangeOf(checked: Checked, extra: Partial<RowRange> = {}): RowRange {
  return { shards: checked.shards, shift: checked.shift, mask: checked.mask, ...extra }
}

/**
 * Copies every row of the moving shards, inserting only where missing. @returns rows read.
 *
 * Rows keep arriving while the copy runs, always ahead of it (IDs grow with time), so a copy that
 * ran to the last row would chase busy shards for ever. It goes in passes instead: a pass ends at
 * the first page reaching rows made after the pass started, the next pass copies what arrived
 * meanwhile, and after {@link COPY_PASSES} passes, or after a pass that copied no fewer rows than
 * the one before (rows arrive faster than they are copied: passes would only grow), the rest is
 * left to the reconciliation (while writes wait), which makes the target equal to the source
 * whatever the copy left out.
 */
async function copyRows(
  checked: Checked,
  source: RowStore,
  target: RowStore,
  table: MovedTable,
): Promise<number> {
  const { batchSize, signal } = checked
  let after: bigint | undefined
  let copied = 0
  let lastPass = Number.POSITIVE_INFINITY
  for (let pass = 1; pass <= COPY_PASSES; pass++) {
    const passStarted = Date.now()
    let passCopied = 0
    for (;;) {
      throwIfCancelled(signal, 'the move')
      const rows = await source.readRows(
        table,
        rangeOf(checked, { after, limit: batchSize }),
        signal,
      )
      if (rows.length === 0) return copied
      await target.writeRows(table, rows, 'missing', signal)
      copied += rows.length
      passCopied += rows.length
      after = rows.at(-1)!.id
      await checked.onProgress({ phase: 'copying', table: table.name, rows: copied })
      if (rows.length < batchSize) return copied
      if (madeAt(checked.sharding.layout, after) >= passStarted) break
    }
    // A pass of one page: the copy has caught up to within a page, the switch does the rest.
    if (passCopied <= batchSize) break
    // A pass no shorter than the one before: rows arrive at least as fast as they are copied, so
    // more passes would only grow (each as long as the rows that arrived during the last): the
    // switch takes the rest now.
    if (passCopied >= lastPass) break
    lastPass = passCopied
  }
  return copied
}

/** When an ID was made, in ms since 1970 (its time field, read as this layout's). */
function madeAt(layout: Layout, id: bigint): number {
  const unsigned = BigInt.asUintN(64, id)
  const time = (unsigned >> layout.shifts.time) & ((1n << BigInt(layout.timeBits)) - 1n)
  return layout.epoch + Number(time) * layout.timeUnitMs
}

/**
 * Walks both servers' rows of a table in ID order, a page of the source at a time, with the
 * target's rows in the same ID span. Calls `chunk` for each span (the last one open-ended).
 */
async function walkChunks(
  checked: Checked,
  source: RowStore,
  target: RowStore,
  table: MovedTable,
  chunk: (sourceRows: StoredRow[], targetRows: StoredRow[]) => Promise<void>,
): Promise<void> {
  const { batchSize, signal } = checked
  let after: bigint | undefined
  for (;;) {
    throwIfCancelled(signal, 'the move')
    const sourceRows = await source.readRows(
      table,
      rangeOf(checked, { after, limit: batchSize }),
      signal,
    )
    const last = sourceRows.length < batchSize ? undefined : sourceRows.at(-1)!.id
    const targetRows = await target.readRows(table, rangeOf(checked, { after, upTo: last }), signal)
    await chunk(sourceRows, targetRows)
    if (last === undefined) return
    after = last
  }
}

/** Makes the target's rows of the moving shards equal to the source's (writes wait meanwhile). */
async function reconcile(
  checked: Checked,
  source: RowStore,
  target: RowStore,
  reports: Map<string, { repaired: number; removed: number }>,
): Promise<void> {
  const { tables, signal, onProgress } = checked
  const extra = new Map<string, bigint[]>()
  for (const table of tables) {
    const report = reports.get(table.name)!
    const removed: bigint[] = []
    extra.set(table.name, removed)
    let seen = 0
    await walkChunks(checked, source, target, table, async (sourceRows, targetRows) => {
      seen += sourceRows.length
      if (digest(sourceRows) === digest(targetRows)) return
      const there = new Map(targetRows.map((row) => [row.id, row.content]))
      const changed = sourceRows.filter((row) => there.get(row.id) !== row.content)
      const kept = new Set(sourceRows.map((row) => row.id))
      removed.push(...targetRows.filter((row) => !kept.has(row.id)).map((row) => row.id))
      if (changed.length > 0) await target.writeRows(table, changed, 'replace', signal)
      report.repaired += changed.length
    })
    await onProgress({ phase: 'reconciling', table: table.name, rows: seen })
  }
  // Children first: a parent deleted on the source took its children with it.
  for (const table of [...tables].reverse()) {
    const ids = extra.get(table.name)!
    for (let start = 0; start < ids.length; start += checked.batchSize) {
      await target.deleteRows(table, ids.slice(start, start + checked.batchSize), signal)
    }
    reports.get(table.name)!.removed += ids.length
  }
}

/** Compares counts and checksums of every table on both servers; the mismatch, if any. */
async function verify(
  checked: Checked,
  source: RowStore,
  target: RowStore,
  reports: Map<string, { rows: number }>,
): Promise<RowsMismatchError | undefined> {
  for (const table of checked.tables) {
    const sums = { source: createHash('sha256'), target: createHash('sha256') }
    const counts = { source: 0, target: 0 }
    await walkChunks(checked, source, target, table, async (sourceRows, targetRows) => {
      counts.source += sourceRows.length
      counts.target += targetRows.length
      for (const row of sourceRows) sums.source.update(`${row.id}\u0000${row.content}\u0000`)
      for (const row of targetRows) sums.target.update(`${row.id}\u0000${row.content}\u0000`)
    })
    const [sourceSum, targetSum] = [sums.source.digest('hex'), sums.target.digest('hex')]
    if (counts.source !== counts.target || sourceSum !== targetSum) {
      return new RowsMismatchError(
        `Table ${table.name} differs between the servers after reconciling logical shards ${formatShardList(checked.shards)}: ${counts.source} rows (checksum ${sourceSum.slice(0, 12)}) on the source, ${counts.target} (checksum ${targetSum.slice(0, 12)}) on the target. Something wrote to them while writes were held (a write not routed through ShardHomes, or a hand edit). Nothing switched: the shards serve on the source again; run the move again.`,
      )
    }
    reports.get(table.name)!.rows = counts.source
    await checked.onProgress({ phase: 'verifying', table: table.name, rows: counts.source })
  }
  return undefined
}

/** Deletes every row of the moving shards from `store`, children first. @returns rows deleted. */
async function deleteCopies(checked: Checked, store: RowStore): Promise<number> {
  const { batchSize, signal } = checked
  let total = 0
  for (const table of [...checked.tables].reverse()) {
    let deleted = 0
    for (;;) {
      throwIfCancelled(signal, 'the move')
      const count = await store.deleteRange(table, rangeOf(checked, { limit: batchSize }), signal)
      deleted += count
      if (count > 0)
        await checked.onProgress({ phase: 'deleting', table: table.name, rows: deleted })
      if (count < batchSize) break
    }
    total += deleted
  }
  return total
}

function digest(rows: readonly StoredRow[]): string {
  const hash = createHash('sha256')
  for (const row of rows) hash.update(`${row.id}\u0000${row.content}\u0000`)
  return `${rows.length}:${hash.digest('hex')}`
}

/** Sleeps `ms`, or fails with `CancelledError` as soon as `signal` aborts. */
function wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
  throwIfCancelled(signal, 'the move')
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer)
      reject(new CancelledError('The move was cancelled by the caller.', { cause: signal?.reason }))
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
