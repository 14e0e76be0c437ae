import { ConfigurationError } from '@shardflake/core'
import { shardSchemaName } from './identifiers'
import type { MoveSession } from './move-session'
import { readShardState } from './shard-state'
import { fenceStatements } from './sql/fence'
import { counterLimit, type ResolvedSqlOptions } from './sql/options'
import { STRICT_MODE_BEGIN, STRICT_MODE_END } from './sql/shard-parts'
import { shardRoutineStatements } from './sql/shard-routines'
import { shardSetupStatements } from './sql/shard-setup'

/**
 * Fences the shard on its old home (see `fenceStatements`); returns L, and whether it was
 * fenced already. @internal
 */
export async function fence(
  session: MoveSession,
  o: ResolvedSqlOptions,
  shard: number,
  destination: string,
): Promise<{ fencedAt: bigint; resumed: boolean; moveId: string }> {
  const database = shardSchemaName(shard, o.schemaPrefix)
  const limit = counterLimit(o.layout)
  const before = await readShardState(session.connection, database)
  const resumed = before?.movedTo !== undefined || (before?.counter ?? 0n) > limit
  session.stage = resumed ? 'fenced' : 'untouched'
  for (const statement of [
    ...STRICT_MODE_BEGIN,
    ...fenceStatements(o, shard, destination),
    ...STRICT_MODE_END,
  ]) {
    await session.connection.query(statement)
    if (!statement.startsWith('SET ')) session.stage = 'fenced'
  }
  const after = await readShardState(session.connection, database)
  if (after?.counter === undefined || after.counter <= limit || after.moveId === undefined) {
    throw new ConfigurationError(
      `The counter of logical shard ${shard} on the old server (${database}.sf_counter) is missing, or was not fenced and recorded; it was changed during the move. Run the move again.`,
    )
  }
  let fencedAt = after.counter - limit - 1n
  // The recorded L (InnoDB, durable) wins over a counter row that lost writes in a crash.
  if (after.movedFence !== undefined && after.movedFence > fencedAt) fencedAt = after.movedFence
  return { fencedAt, resumed, moveId: after.moveId }
}

/**
 * Installs the shard on its new home when needed (lifting the fence of an earlier move away from
 * it), moves its counter to at least L, and only then (re)creates its drawing routines there: no
 * routine of the new home ever draws from a counter below L. @internal
 */
export async function arrive(
  session: MoveSession,
  o: ResolvedSqlOptions,
  shard: number,
  fencedAt: bigint,
  moveId: string,
): Promise<{ aheadMs: number }> {
  const database = shardSchemaName(shard, o.schemaPrefix)
  const db = `\`${database}\``
  const limit = counterLimit(o.layout)
  session.stage = 'arriving'
  const state = await readShardState(session.connection, database)
  if (state?.movedTo !== undefined) {
    // Moving back: this server's fence stays in its counter until the UPDATE below lifts it.
    await session.connection.query(
      `DELETE FROM ${db}.\`sf_meta\` WHERE \`name\` IN ('moved_to', 'moved_at', 'moved_fence', 'move_id')`,
    )
  }
  const run = async (statements: readonly string[]) => {
    for (const statement of statements) await session.connection.query(statement)
  }
  await run([...STRICT_MODE_BEGIN, ...shardSetupStatements(o, shard), ...STRICT_MODE_END])
  // Before the counter and the routines: once they serve here, this move cannot lift a fence
  // this server gets later (a move onwards).
  await session.connection.query(
    `INSERT INTO ${db}.\`sf_meta\` (\`name\`, \`value\`) VALUES ('arrived_by', ?) ON DUPLICATE KEY UPDATE \`value\` = VALUES(\`value\`)`,
    [moveId],
  )
  await session.connection.query(
    `UPDATE ${db}.\`sf_counter\` SET \`v\` = GREATEST(IF(\`v\` > ${limit}, \`v\` - ${limit + 1n}, \`v\`), ${fencedAt}) WHERE \`k\` = 1`,
  )
  await run([...STRICT_MODE_BEGIN, ...shardRoutineStatements(o, shard), ...STRICT_MODE_END])
  const [rows] = await session.connection.query(
    `SELECT CAST(\`v\` AS CHAR) AS v, CAST(FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS CHAR) AS now FROM ${db}.\`sf_counter\` WHERE \`k\` = 1`,
  )
  const row = (rows as { v?: unknown; now?: unknown }[])[0]
  const counter = BigInt(String(row?.v))
  if (counter < fencedAt) {
    throw new ConfigurationError(
      `The counter of logical shard ${shard} on the new server stands at ${counter}, below the fence ${fencedAt}; it was changed during the move. Run the move again.`,
    )
  }
  const { layout } = o
  const fenceMs = Number(fencedAt >> BigInt(layout.sequenceBits)) * layout.timeUnitMs + layout.epoch
  session.stage = 'done'
  return { aheadMs: fenceMs - Number(row?.now) }
}
