import type { Sharding } from '@shardflake/core'
import type { ModelMetadata, RelationMetadata } from './metadata'
import { type Data, isObject, isScalar } from './walk'

/** A row the operation creates. */
export interface NewRow {
  readonly kind: 'new'
  readonly model: string
  readonly meta: ModelMetadata
  readonly data: Data
  /**
   * Rows a foreign key of this row points to, by relation field (parent, nested-created parent).
   * Add to it with {@link linkRow} only: rows of a `createMany` share {@link NO_LINKS}.
   */
  links: Map<string, Row>
  shard?: number
  id?: bigint
  /** True when the caller gave the ID: it is checked against the rule, and children follow it. */
  given?: boolean
  /**
   * True when `shard` is known to be the shard of the ID and the one the rule gives: the router
   * read it back from an ID it made, or a server's hook took it from the router (a row with the
   * same ID and key).
   */
  verified?: boolean
}

/**
 * An update (or an upsert's update branch) that writes a field the rule of a sharded model reads:
 * the stored row (`target`, found by its `where`) must stay on the shard of its ID.
 */
export interface KeyChange {
  /** The stored row, by its unique `where` (an upsert's: no row means no update). */
  readonly target: ExistingRow
  /** The fields the update writes, as a row the rule can be applied to. */
  readonly after: NewRow
  /** `update` or `upsert`, for messages. */
  readonly operation: string
}

/** A row that exists already (the target of an update): only its unique `where` is known. */
export interface ExistingRow {
  readonly kind: 'existing'
  readonly model: string
  readonly meta: ModelMetadata
  readonly data: Data
  readonly links: Map<string, Row>
  /**
   * Whether a missing field may be read from the database and pinned into `where`: `'exists'`
   * (an update: no row is an error), `'maybe'` (an upsert: no row means its update branch does
   * not run) or `false`.
   */
  readonly askable: 'exists' | 'maybe' | false
}

export type Row = NewRow | ExistingRow

/** The links of a new row that has none yet, shared: {@link linkRow} replaces it before adding. */
export const NO_LINKS: Map<string, Row> = new Map()

/** Links `row`'s relation field `name` to `target`. */
export function linkRow(row: Row, name: string, target: Row): void {
  if (row.kind === 'new' && row.links === NO_LINKS) row.links = new Map()
  row.links.set(name, target)
}

/**
 * A value only the database knows: which row a `where` names (an existing row, a `connect`), or
 * whether a `connectOrCreate` connects or creates. Answered before anything is allocated, and the
 * arguments are rewritten so that the write does what the answer said or fails: the `where` is
 * pinned to the ID read, a `connectOrCreate` becomes a `connect` or a `create`.
 */
export interface Question {
  readonly row: Row
  /** The relation field holding the write (`undefined`: the row's own `where`). */
  readonly name?: string
  readonly relation?: RelationMetadata
  readonly field: string
}

export type Lookup = { value: unknown } | { pending: NewRow } | { ask: Question } | undefined
const NOTHING: Data = {}

/** The value of `field` on `row`: given, implied by a parent, pending, or to ask the database. */
export function lookup(row: Row, field: string): Lookup {
  if (row.kind === 'new' && field === row.meta.id) {
    return row.id !== undefined ? { value: row.id } : { pending: row }
  }
  const own = row.data[field]
  if (isScalar(own)) return { value: own }
  if (row.kind === 'existing') {
    return row.askable !== false && Object.keys(row.data).length > 0
      ? { ask: { row, field } }
      : undefined
  }
  for (const [name, relation] of Object.entries(row.meta.relations ?? {})) {
    const index = relation.fields?.indexOf(field) ?? -1
    if (index < 0) continue
    const reference = relation.references![index]!
    const linked = row.links.get(name)
    if (linked) return lookup(linked, reference)
    const write = row.data[name]
    if (!isObject(write)) continue
    if (isObject(write.connect)) {
      const value = write.connect[reference]
      return isScalar(value) ? { value } : { ask: { row, name, relation, field: reference } }
    }
    if (isObject(write.connectOrCreate)) return { ask: { row, name, relation, field: reference } }
  }
  return undefined
}

/** The row's shard, a question for the database, or `undefined` while it waits for a parent's ID. */
export function shardOf(row: NewRow, sharding: Sharding): number | Question | undefined {
  const rule = row.meta.rule!
  if ('shard' in rule) return sharding.resolveShard(rule, row.data, row.model)
  const ref = 'shardBy' in rule ? rule.shardBy : rule.sameShardAs
  if (typeof ref === 'function') return sharding.resolveShard(rule, row.data, row.model)
  const found = lookup(row, ref)
  if (found && 'ask' in found) return found.ask
  if (found && 'pending' in found) {
    if (found.pending === row) return sharding.resolveShard(rule, NOTHING, row.model)
    return 'sameShardAs' in rule ? found.pending.shard : undefined
  }
  return sharding.resolveShard(rule, { [ref]: found?.value }, row.model)
}
