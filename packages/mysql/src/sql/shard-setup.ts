import { layoutKey, type ResolvedSqlOptions, sqlString } from './options'
import { SQL_VERSION, shardParts } from './shard-parts'
import { SIGNALS, signal } from './signals'

/**
 * The database of a shard, its metadata and its counter row, without the routines that draw
 * from it. The recorded sharding (layout and logicalShards) is checked first: another one, or a
 * shard that moved away from this server, is refused before anything changes. @internal
 */
export function shardSetupStatements(o: ResolvedSqlOptions, shard: number): string[] {
  const { layout, dialect, sharding } = o
  const { db, S, routine } = shardParts(o, shard)
  const key = layoutKey(layout)
  const engine =
    o.counterEngine === 'Aria' ? 'ENGINE=Aria TRANSACTIONAL=0' : `ENGINE=${o.counterEngine}`
  const meta = (name: string) =>
    `(SELECT \`value\` FROM ${db}.\`sf_meta\` WHERE \`name\` = '${name}')`
  return [
    `CREATE DATABASE IF NOT EXISTS ${db}`,
    `CREATE TABLE IF NOT EXISTS ${db}.\`sf_meta\` (\n  \`name\` VARCHAR(64) NOT NULL PRIMARY KEY,\n  \`value\` TEXT NOT NULL\n) ENGINE=InnoDB`,
    ...routine(
      'PROCEDURE',
      '`sf_check_install`()',
      `BEGIN
  IF ${meta('layout_key')} <> ${sqlString(key)}
     OR ${meta('logical_shards')} <> '${sharding.logicalShards}' THEN
    ${signal(SIGNALS.SHARDING_MISMATCH, `shard ${shard} was installed with another layout or logicalShards`)};
  END IF;
  IF ${meta('moved_to')} IS NOT NULL THEN
    ${signal(SIGNALS.MOVED_AWAY, `logical shard ${shard} moved from this server to another (sf_meta.moved_to); move it back instead`)};
  END IF;
END`,
    ),
    `CALL ${db}.\`sf_check_install\`()`,
    `DROP PROCEDURE ${db}.\`sf_check_install\``,
    `INSERT IGNORE INTO ${db}.\`sf_meta\` (\`name\`, \`value\`) VALUES\n  ('layout_key', ${sqlString(key)}),\n  ('layout', ${sqlString(JSON.stringify(layout.toJSON()))}),\n  ('logical_shards', '${sharding.logicalShards}'),\n  ('shard', '${shard}'),\n  ('dialect', '${dialect}')`,
    `INSERT INTO ${db}.\`sf_meta\` (\`name\`, \`value\`) VALUES ('version', '${SQL_VERSION}') ON DUPLICATE KEY UPDATE \`value\` = VALUES(\`value\`)`,
    `CREATE TABLE IF NOT EXISTS ${db}.\`sf_counter\` (\n  \`k\` TINYINT UNSIGNED NOT NULL PRIMARY KEY,\n  \`v\` BIGINT UNSIGNED NOT NULL COMMENT 'next free (time << ${S} | sequence)',\n  \`t\` BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'latest clock reading (time << ${S}): tells a clock that went back from a burst'\n) ${engine}`,
    `INSERT IGNORE INTO ${db}.\`sf_counter\` (\`k\`, \`v\`, \`t\`) VALUES (1, 0, 0)`,
  ]
}
