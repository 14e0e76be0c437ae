import { MAX_KEY_LENGTH } from '@shardflake/core'
import type { ResolvedSqlOptions } from './options'
import { MAX_BATCH, shardParts } from './shard-parts'
import { SIGNALS, signal } from './signals'

/**
 * `reserve_ids(n)`, `next_id()`, `next_ids(n)`, `shard_for_key(key, mode)`, `generate_id(shard_key, OUT id)` and the decode
 * helpers of one shard, one function per routine. @internal
 */
export function shardRoutineStatements(o: ResolvedSqlOptions, shard: number): string[] {
  return [
    ...reserveIdsRoutine(o, shard),
    ...nextIdRoutine(o, shard),
    ...nextIdsRoutine(o, shard),
    ...shardForKeyRoutine(o, shard),
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

/** The head of `generate_id`, shared with the fence that replaces it on a moved shard. @internal */
export const GENERATE_ID_HEAD =
  '`generate_id`(IN shard_key TEXT CHARACTER SET utf8mb4, OUT id BIGINT)'

/** UTF-8 of the white space that makes a key blank: what JavaScript's `String.prototype.trim` removes. */
const BLANK_UTF8 = [
  '09',
  '0A',
  '0B',
  '0C',
  '0D',
  '20',
  'C2A0',
  'E19A80',
  'E28080',
  'E28081',
  'E28082',
  'E28083',
  'E28084',
  'E28085',
  'E28086',
  'E28087',
  'E28088',
  'E28089',
  'E2808A',
  'E280A8',
  'E280A9',
  'E280AF',
  'E2819F',
  'E38080',
  'EFBBBF',
]

/**
 * `shard_for_key(shard_key, key_mode)`: the logical shard of a key, as core's `shardForKey`
 * computes it, refusing the same keys (SF008 missing, SF009 outside the domain). @internal
 */
function shardForKeyRoutine(o: ResolvedSqlOptions, shard: number): string[] {
  const { routine } = shardParts(o, shard)
  const n = o.sharding.logicalShards
  const stripped = BLANK_UTF8.reduce((sql, hex) => `REPLACE(${sql}, X'${hex}', '')`, 'b')
  return routine(
    'FUNCTION',
    '`shard_for_key`(shard_key TEXT CHARACTER SET utf8mb4, key_mode VARCHAR(8) CHARACTER SET utf8mb4) RETURNS INT',
    `  DETERMINISTIC NO SQL
  COMMENT 'shardflake: the logical shard of a key, as shardForKey computes it'
BEGIN
  -- Integers of any width (ASCII digits, an optional leading '-', in key_mode 'auto') go to
  -- key mod ${n}, made non-negative; any other text to 32-bit FNV-1a of its UTF-8 bytes mod ${n}.
  -- DECIMAL cannot hold ${MAX_KEY_LENGTH} digits, so the modulo is taken digit by digit while
  -- scanning: r = (r * 10 + digit) mod ${n}. Keys are not folded or trimmed, whatever the collation: 'ACME', 'acme' and 'acme '
  -- are three keys.
  DECLARE b LONGBLOB DEFAULT CAST(shard_key AS BINARY);
  DECLARE len INT DEFAULT LENGTH(b);
  DECLARE i INT DEFAULT 1;
  DECLARE c INT;
  DECLARE h BIGINT UNSIGNED DEFAULT 2166136261;
  DECLARE digits BOOLEAN DEFAULT TRUE;
  DECLARE r BIGINT DEFAULT 0;
  IF key_mode IS NULL OR HEX(key_mode) NOT IN ('6175746F', '68617368') THEN
    ${signal('22023', "key_mode must be 'auto' or 'hash'")};
  END IF;
  IF shard_key IS NULL THEN
    ${signal(SIGNALS.MISSING_KEY, 'the shard key is missing (NULL): set it before inserting')};
  END IF;
  IF CHAR_LENGTH(shard_key) > ${MAX_KEY_LENGTH} THEN
    ${signal(SIGNALS.INVALID_KEY, `the shard key is longer than ${MAX_KEY_LENGTH} characters`)};
  END IF;
  IF LENGTH(${stripped}) = 0 THEN
    ${signal(SIGNALS.MISSING_KEY, 'the shard key is empty or only white space: set it before inserting')};
  END IF;
  WHILE i <= len DO
    SET c = ASCII(SUBSTRING(b, i, 1));
    IF c = 0 THEN
      ${signal(SIGNALS.INVALID_KEY, 'the shard key holds U+0000')};
    END IF;
    IF digits AND NOT (c BETWEEN 48 AND 57 OR (c = 45 AND i = 1 AND len > 1)) THEN
      SET digits = FALSE;
    END IF;
    IF digits AND c <> 45 THEN
      SET r = (r * 10 + (c - 48)) MOD ${n};
    END IF;
    SET h = ((h ^ c) * 16777619) & 4294967295;
    SET i = i + 1;
  END WHILE;
  IF digits AND HEX(key_mode) = '6175746F' THEN
    -- A leading '-' negates the key: -r mod ${n}, made non-negative.
    RETURN IF(ASCII(b) = 45, MOD(${n} - r, ${n}), r);
  END IF;
  RETURN h MOD ${n};
END`,
  )
}

/**
 * `generate_id(shard_key, OUT id)`: an ID for a row whose shard key is `shard_key`, through the
 * atomic counter; refuses a key of another shard (SF021), a missing key (SF008) and a key outside
 * the domain (SF009), as `shard_for_key(shard_key, 'auto')` decides.
 */
function generateIdRoutine(o: ResolvedSqlOptions, shard: number): string[] {
  const { db, routine } = shardParts(o, shard)
  return routine(
    'PROCEDURE',
    GENERATE_ID_HEAD,
    `  NOT DETERMINISTIC MODIFIES SQL DATA
  COMMENT 'shardflake: an ID for a row whose shard key is shard_key'
BEGIN
  -- The key arrives as text, so that NULL, '' or 'abc' cannot become 0 on the way in (a BIGINT
  -- parameter reads them as 0 under a lax sql_mode, and 0 is a key of shard 0).
  IF ${db}.\`shard_for_key\`(shard_key, 'auto') <> ${shard} THEN
    ${signal(SIGNALS.WRONG_SHARD, `the shard key belongs to another logical shard: shard_for_key(key) is not ${shard}`)};
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
