import { type ChangeSet, ChangeSetPersister } from '@mikro-orm/core'
import { shardedKeyOf } from './sharded-id'

type Row = Record<string, unknown>

type ExecuteInserts = (changeSets: ChangeSet<Row>[], ...rest: unknown[]) => Promise<unknown>

const installed = Symbol.for('shardflake.mikro-orm.ascendingInserts')

/**
 * Makes MikroORM insert the rows of a sharded entity in the order of their IDs. Every INSERT of
 * entities goes through `ChangeSetPersister.executeInserts`: a flush, and `em.insert()` /
 * `em.insertMany()` of entity instances. IDs given one at a time (at `em.create()`, or when
 * MikroORM runs `onCreate` while it computes a flush) ascend per shard but interleave across
 * shards; sorted, the multi-row INSERT appends to the primary key's B-tree as AUTO_INCREMENT does
 * instead of splitting pages in the middle (InnoDB clusters rows by primary key).
 *
 * Installed once per `ChangeSetPersister` class (MikroORM 6 and 7 each have theirs). Only batches
 * of entities with a sharded key are reordered, and only when every row has its key. The order of
 * a batch is free: a flush inserts a row that references another row of the same batch with the
 * reference empty and sets it by an UPDATE afterwards.
 */
export function insertInIdOrder(persister: object | undefined): void {
  const proto: unknown = persister && Object.getPrototypeOf(persister)
  if (!proto || typeof proto !== 'object' || Object.hasOwn(proto, installed)) return
  const original: unknown = Reflect.get(proto, 'executeInserts')
  if (typeof original !== 'function') return
  const execute = original as ExecuteInserts
  Object.defineProperty(proto, installed, { value: true })
  Object.defineProperty(proto, 'executeInserts', {
    configurable: true,
    writable: true,
    value: function executeInserts(
      this: unknown,
      changeSets: ChangeSet<Row>[],
      ...rest: unknown[]
    ) {
      return execute.call(this, inIdOrder(changeSets), ...rest)
    },
  })
}

/** Installs {@link insertInIdOrder} on the `ChangeSetPersister` this package was built with. */
export function insertInIdOrderByDefault(): void {
  insertInIdOrder(Object.create(ChangeSetPersister.prototype) as object)
}

/**
 * `changeSets` sorted by their sharded key, or as given when they already ascend or a row has no
 * key of a sharded entity.
 */
export function inIdOrder(changeSets: ChangeSet<Row>[]): ChangeSet<Row>[] {
  if (!Array.isArray(changeSets) || changeSets.length < 2) return changeSets
  const keys = new Array<bigint>(changeSets.length)
  let ascending = true
  for (let i = 0; i < changeSets.length; i++) {
    const { meta, entity } = changeSets[i]!
    const key = shardedKeyOf(meta)
    if (!key) return changeSets
    const id = numeric(entity[key.prop.name])
    if (id === undefined) return changeSets
    keys[i] = id
    if (i > 0 && id < keys[i - 1]!) ascending = false
  }
  if (ascending) return changeSets
  const order = changeSets.map((_, i) => i)
  order.sort((a, b) => (keys[a]! < keys[b]! ? -1 : keys[a]! > keys[b]! ? 1 : 0))
  return order.map((i) => changeSets[i]!)
}

function numeric(value: unknown): bigint | undefined {
  if (typeof value === 'bigint') return value
  if (typeof value === 'string' && /^-?\d+$/.test(value)) return BigInt(value)
  if (typeof value === 'number' && Number.isSafeInteger(value)) return BigInt(value)
  return undefined
}
