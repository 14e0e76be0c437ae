import type { Sharding, ShardRule } from '@shardflake/core'
import type { NewRow } from './rows'
import { isScalar } from './walk'

/**
 * Placements the router hands to the server clients it writes through, so that a row is placed
 * once: the router reads its key, gives it an ID and checks the ID's shard; the server's
 * `shardedIds` hook, handed the row with that ID, and the home check after it take that shard
 * instead of hashing the key and reading the ID again, as long as the row still holds the same
 * ID and key. Prisma hands each query hook a deep copy of the arguments, so rows are matched by
 * value (ID, key), in order, never by object.
 */

/** How a rule turns the key it reads into a shard: by the key (`shardBy`), or its ID's shard. */
type KeyMode = 'auto' | 'hash' | 'id'

/** The rows of one write the router sends one server, in the order the server's hook sees them. */
interface RoutedWrite {
  readonly sharding: Sharding
  readonly ids: readonly bigint[]
  /** The key each row was placed by; {@link UNPLACED} for a row the hook must check itself. */
  readonly keys: readonly unknown[]
  readonly modes: readonly (KeyMode | undefined)[]
  /** The shard of each row's ID, which is the shard its rule gives for its key. */
  readonly shards: readonly number[]
  /** Whether the client the rows are sent through runs the home check after the hook. */
  readonly homeChecked: boolean
}

const UNPLACED = Symbol('unplaced')

/** Writes in flight from a router to a server's client, by the ID of their first row. */
const inFlight = new Map<bigint, RoutedWrite>()

/** The field a rule reads from the row itself, or `undefined` (a function, a fixed shard). */
function keyField(rule: ShardRule | undefined): string | undefined {
  if (!rule) return undefined
  if ('shardBy' in rule) return typeof rule.shardBy === 'string' ? rule.shardBy : undefined
  if ('sameShardAs' in rule) {
    return typeof rule.sameShardAs === 'string' ? rule.sameShardAs : undefined
  }
  return undefined
}

function keyMode(rule: ShardRule): KeyMode {
  return 'shardBy' in rule ? (rule.stringKeys ?? 'auto') : 'id'
}

/**
 * The shard of a new row's ID, read once by the router; `verified` when it is the shard the row
 * was placed on by the key it holds (an ID the source made for that shard), so that the server's
 * hook may take it without placing the row again.
 */
export function routedShard(sharding: Sharding, row: NewRow): number {
  const shard = sharding.shardOfId(row.id!)
  if (!row.given && shard === row.shard) row.verified = true
  return shard
}

/**
 * Records the rows of one write the router is about to send a server's client (after
 * {@link routedShard} read each one's shard), and whether that client runs the home check.
 * Returns the function that forgets them, to call once the write settled.
 */
export function markRouted(
  sharding: Sharding,
  rows: readonly NewRow[],
  homeChecked: boolean,
): () => void {
  const first = rows[0]?.id
  if (first === undefined || inFlight.has(first)) return () => {}
  const n = rows.length
  const ids = new Array<bigint>(n)
  const keys = new Array<unknown>(n)
  const modes = new Array<KeyMode | undefined>(n)
  const shards = new Array<number>(n)
  for (let i = 0; i < n; i++) {
    const row = rows[i]!
    const rule = row.meta.rule
    const field = keyField(rule)
    const key = field === undefined ? undefined : row.data[field]
    const placed = row.verified === true && isScalar(key)
    ids[i] = row.id!
    keys[i] = placed ? key : UNPLACED
    modes[i] = placed ? keyMode(rule!) : undefined
    shards[i] = row.shard ?? -1
  }
  const write: RoutedWrite = { sharding, ids, keys, modes, shards, homeChecked }
  inFlight.set(first, write)
  return () => {
    if (inFlight.get(first) === write) inFlight.delete(first)
  }
}

/**
 * Marks the rows of a server hook's plan that the router placed (same order, same ID, same key
 * read the same way, same sharding) as placed on the shard it recorded: their IDs need no check
 * against their rules.
 * @returns `false` when the router sent these rows through a client without the home check
 * (nothing will read a {@link leaveHomeNote}); `true` otherwise.
 */
export function adoptRouted(sharding: Sharding, rows: readonly NewRow[]): boolean {
  const first = rows[0]
  if (!first?.given) return true
  const write = inFlight.get(first.id!)
  if (!write || write.sharding !== sharding || write.ids.length !== rows.length) return true
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!
    if (!row.given || row.id !== write.ids[i] || write.keys[i] === UNPLACED) continue
    const rule = row.meta.rule
    const field = keyField(rule)
    if (field === undefined || keyMode(rule!) !== write.modes[i]) continue
    if (!Object.is(row.data[field], write.keys[i])) continue
    row.shard = write.shards[i]!
    row.verified = true
  }
  return write.homeChecked
}

/**
 * What a `shardedIds` hook hands the home check that runs after it in the same query: the new
 * rows' IDs as it passes them on (in `data` order for `createMany`, in the order of the walk
 * otherwise) and their shards, when the router placed every one of them.
 */
export interface HomeNote {
  readonly ids: readonly unknown[]
  readonly shards: readonly number[]
}

/** Notes by Prisma's request object, which every query hook of one query is handed. */
const notes = new WeakMap<object, HomeNote>()

/** Leaves `note` for the home check of the query whose request is `request`. */
export function leaveHomeNote(request: object, note: HomeNote): void {
  notes.set(request, note)
}

/**
 * The shards of the new rows a home check is handed (`idsOf()`, in the note's order), from the note
 * the `shardedIds` hook left, when every row still holds the ID it passed on; `undefined`
 * otherwise (then the home check reads every ID itself).
 */
export function notedShards(
  request: unknown,
  idsOf: () => readonly unknown[],
): readonly number[] | undefined {
  if (typeof request !== 'object' || request === null) return undefined
  const note = notes.get(request)
  if (!note) return undefined
  notes.delete(request)
  const ids = idsOf()
  if (note.ids.length !== ids.length) return undefined
  for (let i = 0; i < ids.length; i++) if (ids[i] !== note.ids[i]) return undefined
  return note.shards
}
