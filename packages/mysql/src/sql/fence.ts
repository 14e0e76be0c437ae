import { InvalidArgumentError } from '@shardflake/core'
import type { ResolvedSqlOptions } from './options'
import { sqlString } from './options'
import { shardParts } from './shard-parts'
import { GENERATE_ID_HEAD } from './shard-routines'
import { SIGNALS } from './signals'

/**
 * The statements that **fence** a logical shard on its old server when it moves to another one
 * (what `moveMysqlShards` runs there, in this order; the reasoning is in docs/move.md):
 *
 * 1. `reserve_ids(n)` is replaced by a version that SIGNALs SQLSTATE `SF005` (moved);
 * 2. the move is recorded in `sf_meta` (`moved_to`, `moved_at`, `move_id`), so the installer and
 *    the install script refuse to bring the shard back to life here;
 * 3. `next_id()`, `next_ids(n)` and `generate_id(...)` are replaced likewise;
 * 4. the counter itself is fenced in one UPDATE: its value `L` becomes `L + limit + 1`, past the
 *    end of the layout's time field, so a reserve still running an old body finds no room;
 * 5. `L` is recorded as `sf_meta.moved_fence`.
 *
 * Every statement may be run again (a move that stopped half-way resumes). `destination`
 * describes the new home in the error messages. @internal
 * @throws InvalidArgumentError for an empty destination, or one with control characters.
 */
export function fenceStatements(
  o: ResolvedSqlOptions,
  shard: number,
  destination: string,
): string[] {
  if (
    typeof destination !== 'string' ||
    destination.length < 1 ||
    destination.length > 255 ||
    // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing them is the point
    /[\u0000-\u001f\u007f]/.test(destination)
  ) {
    throw new InvalidArgumentError(
      'destination must be 1-255 characters without control characters.',
    )
  }
  const { db, limitV, routine } = shardParts(o, shard)
  const offset = (limitV + 1n).toString()
  // At most 128 characters (MySQL's limit for MESSAGE_TEXT): the destination is cut to 60.
  const moved = `shardflake: logical shard ${shard} moved to ${destination.slice(0, 60)}; update the shard map`
  const refuse = (kind: 'FUNCTION' | 'PROCEDURE', head: string) =>
    routine(
      kind,
      head,
      `  NOT DETERMINISTIC NO SQL
  COMMENT 'shardflake: logical shard ${shard} moved to another server'
BEGIN
  SIGNAL SQLSTATE '${SIGNALS.MOVED}' SET MESSAGE_TEXT = ${sqlString(moved.slice(0, 128))};${kind === 'FUNCTION' ? '\n  RETURN NULL;' : ''}
END`,
    )
  return [
    ...refuse('FUNCTION', '`reserve_ids`(n INT) RETURNS BIGINT UNSIGNED'),
    `INSERT INTO ${db}.\`sf_meta\` (\`name\`, \`value\`) VALUES\n  ('moved_to', ${sqlString(destination)}),\n  ('moved_at', DATE_FORMAT(UTC_TIMESTAMP(), '%Y-%m-%dT%H:%i:%sZ')),\n  ('move_id', UUID())\nON DUPLICATE KEY UPDATE \`value\` = IF(\`name\` = 'moved_to', VALUES(\`value\`), \`value\`)`,
    ...refuse('FUNCTION', '`next_id`() RETURNS BIGINT'),
    ...refuse('PROCEDURE', '`next_ids`(IN n INT)'),
    ...refuse('PROCEDURE', GENERATE_ID_HEAD),
    `UPDATE ${db}.\`sf_counter\` SET \`v\` = \`v\` + ${offset} WHERE \`k\` = 1 AND \`v\` <= ${limitV}`,
    `INSERT INTO ${db}.\`sf_meta\` (\`name\`, \`value\`)\nSELECT 'moved_fence', CAST(\`v\` - ${offset} AS CHAR) FROM ${db}.\`sf_counter\` WHERE \`k\` = 1 AND \`v\` > ${limitV}\nON DUPLICATE KEY UPDATE \`value\` = CAST(GREATEST(CAST(\`value\` AS UNSIGNED), CAST(VALUES(\`value\`) AS UNSIGNED)) AS CHAR)`,
  ]
}
