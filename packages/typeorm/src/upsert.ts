/**
 * `upsert()` updates stored rows with whatever the call carries, shard keys included, in one
 * statement no hook sees the stored side of. Before it runs, the rows it may update are checked:
 * an ID never changes shard, so a new key or parent must give the shard of the row's ID.
 */
import { checkKeyChange, type Sharding, suppliedIdsTrusted } from '@shardflake/core'
import type { EntityManager, EntityTarget, ObjectLiteral } from 'typeorm'
import { describeRow, type Pending, Placement, readsRule } from './placement'
import { findShardedId } from './sharded-id'

/**
 * Refuses an `upsert()` that would set a stored row's shard key (or parent) to one whose shard is
 * not its ID's: for rows that carry their ID, against that ID; for rows matched by another
 * conflict column, against the ID of the stored row, read first through `manager`.
 * @throws ShardKeyChangedError before anything is written (outside `trustSuppliedIds`)
 */
export async function checkUpsert(
  manager: EntityManager,
  sharding: Sharding | undefined,
  target: unknown,
  values: unknown,
  conflict: unknown,
): Promise<void> {
  if (!sharding || suppliedIdsTrusted() || !isTarget(target)) return
  if (!manager.connection.hasMetadata(target)) return
  const metadata = manager.connection.getMetadata(target)
  const sharded = findShardedId(metadata.target)
  if (!sharded) return
  const entities = (Array.isArray(values) ? values : [values]).filter(isObject)
  const conflictColumns = metadata.mapPropertyPathsToColumns(conflictPaths(conflict))
  const written = metadata.columns.filter(
    (column) =>
      !conflictColumns.includes(column) &&
      entities.some((entity) => column.getEntityValue(entity) !== undefined),
  )
  if (!readsRule(sharded, metadata, written, [])) return
  const key = sharded.propertyName
  const item = (entity: ObjectLiteral): Pending => ({
    entity,
    metadata,
    sharded,
    roots: undefined,
    supplied: true,
  })
  const check = (entity: ObjectLiteral, id: unknown) => {
    const row = item(entity)
    checkKeyChange(
      sharding,
      id,
      new Placement(sharding, [row]).ruleShard(row),
      `${describeRow(row)}, by upsert()`,
    )
  }
  for (const entity of entities) {
    if (entity[key] !== undefined && entity[key] !== null) check(entity, entity[key])
  }
  // Rows matched by other columns keep their stored ID: read it, and the row as stored.
  const plain = conflictColumns.every(
    (column) => !column.relationMetadata && !column.embeddedMetadata,
  )
  if (conflictColumns.some((column) => column.propertyName === key) || !plain) return
  const matching = entities.filter((entity) =>
    conflictColumns.every((column) => column.getEntityValue(entity) != null),
  )
  if (matching.length === 0 || conflictColumns.length === 0) return
  const where = matching.map((entity) =>
    Object.fromEntries(
      conflictColumns.map((column) => [column.propertyName, column.getEntityValue(entity)]),
    ),
  )
  const stored = await manager.find(target, { where })
  for (const entity of matching) {
    const row = stored.find((candidate) =>
      conflictColumns.every(
        (column) =>
          String(column.getEntityValue(candidate)) === String(column.getEntityValue(entity)),
      ),
    )
    if (row) check(mergeDefined(row, entity), row[key])
  }
}

/** The stored row as the upsert leaves it: `entity`'s defined values over it. */
function mergeDefined(stored: ObjectLiteral, entity: ObjectLiteral): ObjectLiteral {
  const merged: ObjectLiteral = Object.assign(Object.create(Object.getPrototypeOf(stored)), stored)
  for (const [name, value] of Object.entries(entity)) if (value !== undefined) merged[name] = value
  return merged
}

function conflictPaths(conflict: unknown): string[] {
  const paths = Array.isArray(conflict)
    ? conflict
    : isObject(conflict)
      ? conflict.conflictPaths
      : undefined
  if (Array.isArray(paths)) return paths.filter((path) => typeof path === 'string')
  return isObject(paths) ? Object.keys(paths) : []
}

function isTarget(value: unknown): value is EntityTarget<ObjectLiteral> {
  return typeof value === 'function' || typeof value === 'string' || isObject(value)
}

function isObject(value: unknown): value is ObjectLiteral {
  return typeof value === 'object' && value !== null
}
