import type { ResolvedSqlOptions } from './options'
import { MAX_BATCH, shardParts } from './shard-parts'
import { SIGNALS, signal } from './signals'

/**
 * `reserve_ids(n)`, `next_id()`, `next_ids(n)`, `generate_id(shard_key, OUT id)` and the decode
 * helpers of one shard, one function per routine. @internal
 */
export function shardRoutineStatements(o: ResolvedSqlOptions, shard: number): string[] {
  return [
    ...reserveIdsRoutine(o, shard),
    ...nextIdRoutine(o, shard),
    ...nextIdsRoutine(o, shard),
    ...generateIdRoutine(o, shard),
    ...decodeRoutines(o, shard),
  ]
}

/** The ID of counter value `v` (time << S | sequence), as SQL. */
function compose(o: ResolvedSqlOptions, shard: number, v: string): string {
  const { layout } = o
  const S = layout.sequenceBits
  const shardBits = (BigInt(shard) << layout.shifts.shard).toString()
  const mask = (2 ** S - 1).toString()
  return `CAST((((${v}) >> ${S}) << ${Number(layout.shifts.time)}) | ${shardBits} | ((${v}) & ${mask}) AS SIGNED)`
}

/**
 * `reserve_ids(n)`: reserves `n` counter values in one UPDATE and returns the first. The counter
 * never moves back; it may run at most `maxDriftMs` ahead of the clock. `t` keeps the latest
 * clock reading, which tells the two reasons for a refusal apart: the clock went back (SF001)
 * or more IDs were asked than the shard makes within the drift (SF006).
 */
function reserveIdsRoutine(o: ResolvedSqlOptions, shard: number): string[] {
  const { layout } = o
  const { db, S, limitV, routine } = shardParts(o, shard)
  const unit = layout.timeUnitMs
  const driftV = (BigInt(Math.floor(o.maxDriftMs / unit)) << BigInt(S)).toString()
  const nowV = `GREATEST(0, FLOOR((UNIX_TIMESTAMP(SYSDATE(3)) * 1000 + COALESCE(@shardflake_clock_offset_ms, 0) - ${layout.epoch}) / ${unit})) << ${S}`
  return routine(
    'FUNCTION',
    '`reserve_ids`(n INT) RETURNS BIGINT UNSIGNED',
    `  NOT DETERMINISTIC MODIFIES SQL DATA
  COMMENT 'shardflake: reserves n counter values in one UPDATE, returns the first'
BEGIN
  DECLARE now_v BIGINT UNSIGNED DEFAULT ${nowV};
  DECLARE current_v BIGINT UNSIGNED;
  DECLARE seen_v BIGINT UNSIGNED;
  DECLARE message VARCHAR(128);
  IF n IS NULL OR n < 1 OR n > ${MAX_BATCH} THEN
    ${signal(SIGNALS.COUNT, `n must be from 1 to ${MAX_BATCH}`)};
  END IF;
  UPDATE ${db}.\`sf_counter\`
     SET \`v\` = LAST_INSERT_ID(GREATEST(\`v\`, now_v) + n), \`t\` = GREATEST(\`t\`, now_v)
   WHERE \`k\` = 1
     AND GREATEST(\`v\`, now_v) + n <= now_v + ${driftV}
     AND GREATEST(\`v\`, now_v) + n <= ${limitV};
  IF ROW_COUNT() = 1 THEN
    RETURN LAST_INSERT_ID() - n;
  END IF;
  SELECT \`v\`, \`t\` INTO current_v, seen_v FROM ${db}.\`sf_counter\` WHERE \`k\` = 1;
  IF current_v IS NULL THEN
    ${signal(SIGNALS.MISSING, `the counter row of shard ${shard} is missing`)};
  END IF;
  IF current_v > ${limitV} THEN
    ${signal(SIGNALS.MOVED, `logical shard ${shard} moved to another server (sf_meta.moved_to); update the shard map`)};
  END IF;
  IF GREATEST(current_v, now_v) + n > ${limitV} THEN
    ${signal(SIGNALS.EXHAUSTED, 'the time field of the layout is used up')};
  END IF;
  IF n > ${driftV} THEN
    ${signal(SIGNALS.OVERLOADED, `shard ${shard} makes at most ${driftV} IDs within maxDriftMs ${o.maxDriftMs}: ask for fewer per call`)};
  END IF;
  IF seen_v > now_v AND GREATEST(current_v, seen_v) + n <= seen_v + ${driftV} THEN
    SET message = CONCAT('shardflake: the server clock is ', ((seen_v - now_v) >> ${S}) * ${unit},
      ' ms behind a time it showed before (shard ${shard})');
    SIGNAL SQLSTATE '${SIGNALS.CLOCK_BEHIND}' SET MESSAGE_TEXT = message;
  END IF;
  SET message = CONCAT('shardflake: shard ${shard} is ', ((GREATEST(current_v, now_v) + n - now_v) >> ${S}) * ${unit},
    ' ms ahead with this call, more than maxDriftMs ${o.maxDriftMs}');
  SIGNAL SQLSTATE '${SIGNALS.OVERLOADED}' SET MESSAGE_TEXT = message;
END`,
  )
}

/** `next_id()`: one ID. */
function nextIdRoutine(o: ResolvedSqlOptions, shard: number): string[] {
  const { db, routine } = shardParts(o, shard)
  return routine(
    'FUNCTION',
    '`next_id`() RETURNS BIGINT',
    `  NOT DETERMINISTIC MODIFIES SQL DATA
  COMMENT 'shardflake: one new ID of shard ${shard}'
BEGIN
  DECLARE v BIGINT UNSIGNED DEFAULT ${db}.\`reserve_ids\`(1);
  RETURN ${compose(o, shard, 'v')};
END`,
  )
}

/** `next_ids(n)`: `n` ascending IDs as one result set. */
function nextIdsRoutine(o: ResolvedSqlOptions, shard: number): string[] {
  const { db, routine } = shardParts(o, shard)
  const rows =
    o.dialect === 'mariadb'
      ? `FROM seq_0_to_${MAX_BATCH - 1} AS g WHERE g.seq < n ORDER BY g.seq`
      : `FROM JSON_TABLE(CONCAT('[', REPEAT('0,', n - 1), '0]'), '$[*]' COLUMNS (seq FOR ORDINALITY)) AS g ORDER BY g.seq`
  const offset = o.dialect === 'mariadb' ? 'g.seq' : '(g.seq - 1)'
  return routine(
    'PROCEDURE',
    '`next_ids`(IN n INT)',
    `  NOT DETERMINISTIC MODIFIES SQL DATA
  COMMENT 'shardflake: n new ascending IDs of shard ${shard} as one result set'
BEGIN
  DECLARE first_v BIGINT UNSIGNED DEFAULT ${db}.\`reserve_ids\`(n);
  SELECT ${compose(o, shard, `first_v + ${offset}`)} AS \`id\`
    ${rows};
END`,
  )
}

/**
 * `generate_id(shard_key, OUT id)`: an ID for a row keyed by the integer `shard_key`, through the
 * atomic counter; refuses a NULL or non-integer key and a key of another shard.
 */
function generateIdRoutine(o: ResolvedSqlOptions, shard: number): string[] {
  const { db, routine } = shardParts(o, shard)
  const n = o.sharding.logicalShards
  return routine(
    'PROCEDURE',
    '`generate_id`(IN shard_key VARCHAR(40), OUT id BIGINT)',
    `  NOT DETERMINISTIC MODIFIES SQL DATA
  COMMENT 'shardflake: an ID for a row whose shard key is shard_key'
BEGIN
  -- The key arrives as text, so that NULL, '' or 'abc' cannot become 0 on the way in (a BIGINT
  -- parameter reads them as 0 under a lax sql_mode, and 0 is a key of shard 0).
  IF shard_key IS NULL OR shard_key NOT REGEXP '^-?[0-9]{1,19}$'
     OR MOD(CAST(shard_key AS DECIMAL(20, 0)), ${n}) <> ${shard} THEN
    ${signal(SIGNALS.WRONG_SHARD, `the shard key is missing, or its shard (key mod ${n}) is not ${shard}`)};
  END IF;
  SET id = ${db}.\`next_id\`();
END`,
  )
}

/** `id_shard`, `id_sequence`, `id_unix_ms`, `id_time`. */
function decodeRoutines(o: ResolvedSqlOptions, shard: number): string[] {
  const { layout } = o
  const { db, S, routine } = shardParts(o, shard)
  return [
    ...routine(
      'FUNCTION',
      '`id_shard`(id BIGINT) RETURNS INT',
      `  DETERMINISTIC NO SQL
RETURN (CAST(id AS UNSIGNED) >> ${Number(layout.shifts.shard)}) & ${layout.shardCount - 1}`,
    ),
    ...routine(
      'FUNCTION',
      '`id_sequence`(id BIGINT) RETURNS INT',
      `  DETERMINISTIC NO SQL
RETURN CAST(id AS UNSIGNED) & ${(2 ** S - 1).toString()}`,
    ),
    ...routine(
      'FUNCTION',
      '`id_unix_ms`(id BIGINT) RETURNS BIGINT',
      `  DETERMINISTIC NO SQL
RETURN ${layout.epoch} + ((CAST(id AS UNSIGNED) >> ${Number(layout.shifts.time)}) & ${(2n ** BigInt(layout.timeBits) - 1n).toString()}) * ${layout.timeUnitMs}`,
    ),
    ...routine(
      'FUNCTION',
      '`id_time`(id BIGINT) RETURNS DATETIME(3)',
      `  DETERMINISTIC NO SQL
  COMMENT 'in the session time zone'
RETURN FROM_UNIXTIME(${db}.\`id_unix_ms\`(id) / 1000)`,
    ),
  ]
}
