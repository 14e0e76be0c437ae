import { InvalidArgumentError, InvalidLayoutError, type Layout } from '@shardflake/core'
import { checkIdentifier, checkSchemaPrefix, quoteIdentifier } from './identifiers'

/** Which server the SQL is written for. */
export type MysqlDialect = 'mariadb' | 'mysql8'

/** Storage engine of the per-shard counter row. */
export type CounterEngine = 'Aria' | 'MyISAM' | 'InnoDB'

/** What {@link mysqlShardStatements} and {@link generateMysqlSql} take. */
export interface MysqlSqlOptions {
  /** The layout of the IDs (time highest, sequence lowest; decode-only presets are refused). */
  layout: Layout
  /**
   * Which server the SQL is for. Where MariaDB 10.6+ and MySQL 8 differ (CREATE OR REPLACE, the
   * row generator of `next_ids`, the counter's engine) the SQL differs.
   * @default 'mariadb'
   */
  dialect?: MysqlDialect
  /**
   * The database of logical shard `n` is `${schemaPrefix}${n}`.
   * @default 'shard_'
   */
  schemaPrefix?: string
  /**
   * How far (in ms) the counter may run ahead of the server clock: bursts above 2^sequenceBits IDs
   * per ms borrow the next milliseconds, and a clock that stepped back is absorbed up to this. Past
   * it the routines refuse (SQLSTATE 45000) and issue nothing; `MysqlSource` waits and retries.
   * @default 1000
   */
  maxDriftMs?: number
  /**
   * Shard keys are reduced modulo this in the `generate_id(shard_key, OUT id)` procedure.
   * @default layout.shardCount
   */
  logicalShards?: number
  /**
   * Engine of the counter row. Defaults: `Aria` on MariaDB (non-transactional: its table lock ends
   * with the statement, no fsync per call), `InnoDB` on MySQL 8 (durable; its row lock lasts until
   * the calling transaction commits).
   * @default 'Aria' (mariadb), 'InnoDB' (mysql8)
   */
  counterEngine?: CounterEngine
}

/** Largest `n` one `next_ids(n)` / `reserve_ids(n)` call may ask for. */
export const MAX_BATCH = 1_000_000

/** Version of the routines' contract, stored in `sf_meta`. */
export const SQL_VERSION = '1'

/** The prefix of every message the routines SIGNAL (SQLSTATE 45000). */
export const SIGNAL_PREFIX = 'shardflake:'

/** Options with defaults applied. @internal */
export interface ResolvedSqlOptions {
  layout: Layout
  dialect: MysqlDialect
  schemaPrefix: string
  maxDriftMs: number
  logicalShards: number
  counterEngine: CounterEngine
}

/** @internal */
export function resolveSqlOptions(options: MysqlSqlOptions): ResolvedSqlOptions {
  const { layout } = options
  checkGeneratingLayout(layout)
  const dialect = options.dialect ?? 'mariadb'
  if (dialect !== 'mariadb' && dialect !== 'mysql8') {
    throw new InvalidArgumentError(
      `dialect must be 'mariadb' or 'mysql8', got ${JSON.stringify(dialect)}.`,
    )
  }
  const schemaPrefix = checkSchemaPrefix(options.schemaPrefix ?? 'shard_', layout.shardCount - 1)
  const maxDriftMs = options.maxDriftMs ?? 1000
  if (!Number.isSafeInteger(maxDriftMs) || maxDriftMs < layout.timeUnitMs) {
    throw new InvalidArgumentError(
      `maxDriftMs must be an integer of at least one time unit (${layout.timeUnitMs} ms), got ${maxDriftMs}.`,
    )
  }
  const logicalShards = options.logicalShards ?? layout.shardCount
  if (
    !Number.isSafeInteger(logicalShards) ||
    logicalShards < 1 ||
    logicalShards > layout.shardCount
  ) {
    throw new InvalidArgumentError(
      `logicalShards must be an integer from 1 to ${layout.shardCount}, got ${logicalShards}.`,
    )
  }
  const counterEngine = options.counterEngine ?? (dialect === 'mariadb' ? 'Aria' : 'InnoDB')
  if (!['Aria', 'MyISAM', 'InnoDB'].includes(counterEngine)) {
    throw new InvalidArgumentError(`counterEngine must be Aria, MyISAM or InnoDB.`)
  }
  if (counterEngine === 'Aria' && dialect === 'mysql8') {
    throw new InvalidArgumentError('MySQL 8 has no Aria engine: use InnoDB or MyISAM.')
  }
  return { layout, dialect, schemaPrefix, maxDriftMs, logicalShards, counterEngine }
}

/** @throws InvalidLayoutError for layouts the routines cannot generate. @internal */
export function checkGeneratingLayout(layout: Layout): void {
  if (layout.decodeOnly) {
    throw new InvalidLayoutError(
      `Layout ${JSON.stringify(layout.name)} is for decoding other systems' IDs; define your own layout to generate.`,
    )
  }
  if (layout.order.join() !== 'time,shard,worker,sequence') {
    throw new InvalidLayoutError(
      'The MySQL routines need the field order time, shard, worker, sequence (the default).',
    )
  }
  if (layout.timeBits + layout.sequenceBits > 62) {
    throw new InvalidLayoutError(
      'The MySQL routines keep time and sequence in one BIGINT counter: timeBits + sequenceBits must be at most 62.',
    )
  }
}

/**
 * A string that is equal for two layouts exactly when `layout.equals` holds; stored in `sf_meta`
 * so the installer (and the SQL script itself) can refuse a conflicting layout.
 */
export function layoutKey(layout: Layout): string {
  return [
    `epoch=${layout.epoch}`,
    `unit=${layout.timeUnitMs}`,
    `bits=${layout.timeBits}/${layout.shardBits}/${layout.workerBits}/${layout.sequenceBits}`,
    `order=${layout.order.join(',')}`,
  ].join(';')
}

/** The database name of a logical shard. @throws InvalidIdentifierError */
export function shardDatabase(schemaPrefix: string, shard: number): string {
  return checkIdentifier('database', `${schemaPrefix}${shard}`)
}

function sqlString(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`
}

/**
 * The statements that install one logical shard, each to be sent on its own (no `DELIMITER`):
 * database, metadata, counter row, `reserve_ids(n)`, `next_id()`, `next_ids(n)`,
 * `generate_id(shard_key, OUT id)` and the decode helpers. Re-running them is safe: the counter is
 * never reset, a different layout is refused (SQLSTATE 45000) before anything is replaced.
 *
 * @example
 * ```ts
 * for (const statement of mysqlShardStatements({ layout: instagram, dialect: 'mysql8' }, 5)) {
 *   await pool.query(statement)
 * }
 * ```
 */
export function mysqlShardStatements(options: MysqlSqlOptions, shard: number): string[] {
  const o = resolveSqlOptions(options)
  o.layout.checkShard(shard)
  return shardStatements(o, shard)
}

/** @internal */
export function shardStatements(o: ResolvedSqlOptions, shard: number): string[] {
  return [...shardSetupStatements(o, shard), ...shardRoutineStatements(o, shard)]
}

/** The numbers and SQL pieces every statement of a shard uses. */
function shardParts(o: ResolvedSqlOptions, shard: number) {
  const { layout } = o
  const db = quoteIdentifier('database', shardDatabase(o.schemaPrefix, shard))
  const S = layout.sequenceBits
  /** The end of the counter: the first value past the layout's time field. */
  const limitV = counterLimit(layout)
  const fail = (message: string) =>
    `SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = ${sqlString(`${SIGNAL_PREFIX}${message}`)}`
  const create = (kind: 'FUNCTION' | 'PROCEDURE', name: string): string[] =>
    o.dialect === 'mariadb'
      ? [`CREATE OR REPLACE ${kind} ${db}.${name}`]
      : [
          `DROP ${kind} IF EXISTS ${db}.${name.replace(/\(.*$/s, '')}`,
          `CREATE ${kind} ${db}.${name}`,
        ]
  const routine = (kind: 'FUNCTION' | 'PROCEDURE', head: string, body: string): string[] => {
    const parts = create(kind, head)
    parts[parts.length - 1] += `\n${body}`
    return parts
  }
  return { db, S, limitV, fail, routine }
}

/**
 * The database, its metadata (the layout checked first; a shard moved away is refused) and the
 * counter row, without the routines that draw from it. @internal
 */
export function shardSetupStatements(o: ResolvedSqlOptions, shard: number): string[] {
  const { layout, dialect } = o
  const { db, S, fail, routine } = shardParts(o, shard)
  const key = layoutKey(layout)
  const engine =
    o.counterEngine === 'Aria' ? 'ENGINE=Aria TRANSACTIONAL=0' : `ENGINE=${o.counterEngine}`
  return [
    `CREATE DATABASE IF NOT EXISTS ${db}`,
    `CREATE TABLE IF NOT EXISTS ${db}.\`sf_meta\` (\n  \`name\` VARCHAR(64) NOT NULL PRIMARY KEY,\n  \`value\` TEXT NOT NULL\n) ENGINE=InnoDB`,
    ...routine(
      'PROCEDURE',
      '`sf_check_layout`()',
      `BEGIN
  DECLARE installed TEXT DEFAULT (SELECT \`value\` FROM ${db}.\`sf_meta\` WHERE \`name\` = 'layout_key');
  DECLARE moved TEXT DEFAULT (SELECT \`value\` FROM ${db}.\`sf_meta\` WHERE \`name\` = 'moved_to');
  IF installed IS NOT NULL AND installed <> ${sqlString(key)} THEN
    ${fail(`LAYOUT: shard ${shard} has another layout installed`)};
  END IF;
  IF moved IS NOT NULL THEN
    ${fail(`MOVED:logical shard ${shard} moved from this server to another (sf_meta.moved_to); move it back instead`)};
  END IF;
END`,
    ),
    `CALL ${db}.\`sf_check_layout\`()`,
    `DROP PROCEDURE ${db}.\`sf_check_layout\``,
    `INSERT IGNORE INTO ${db}.\`sf_meta\` (\`name\`, \`value\`) VALUES\n  ('layout_key', ${sqlString(key)}),\n  ('layout', ${sqlString(JSON.stringify(layout.toJSON()))}),\n  ('shard', '${shard}'),\n  ('version', '${SQL_VERSION}'),\n  ('dialect', '${dialect}')`,
    `CREATE TABLE IF NOT EXISTS ${db}.\`sf_counter\` (\n  \`k\` TINYINT UNSIGNED NOT NULL PRIMARY KEY,\n  \`v\` BIGINT UNSIGNED NOT NULL COMMENT 'next free (time << ${S} | sequence)'\n) ${engine}`,
    `INSERT IGNORE INTO ${db}.\`sf_counter\` (\`k\`, \`v\`) VALUES (1, 0)`,
  ]
}

/**
 * `reserve_ids(n)`, `next_id()`, `next_ids(n)`, `generate_id(shard_key, OUT id)` and the decode
 * helpers. @internal
 */
export function shardRoutineStatements(o: ResolvedSqlOptions, shard: number): string[] {
  const { layout, dialect } = o
  const { db, S, fail, routine, limitV } = shardParts(o, shard)
  const timeShift = Number(layout.shifts.time)
  const shardBitsValue = (BigInt(shard) << layout.shifts.shard).toString()
  const mask = (2 ** S - 1).toString()
  const unit = layout.timeUnitMs
  const driftV = (BigInt(Math.floor(o.maxDriftMs / unit)) << BigInt(S)).toString()
  /** The ID of counter value `v` (time << S | sequence). */
  const compose = (v: string) =>
    `CAST((((${v}) >> ${S}) << ${timeShift}) | ${shardBitsValue} | ((${v}) & ${mask}) AS SIGNED)`
  const nowV = `GREATEST(0, FLOOR((UNIX_TIMESTAMP(SYSDATE(3)) * 1000 + COALESCE(@shardflake_clock_offset_ms, 0) - ${layout.epoch}) / ${unit})) << ${S}`
  const rows =
    dialect === 'mariadb'
      ? `FROM seq_0_to_${MAX_BATCH - 1} AS g WHERE g.seq < n ORDER BY g.seq`
      : `FROM JSON_TABLE(CONCAT('[', REPEAT('0,', n - 1), '0]'), '$[*]' COLUMNS (seq FOR ORDINALITY)) AS g ORDER BY g.seq`
  const offset = dialect === 'mariadb' ? 'g.seq' : '(g.seq - 1)'

  return [
    ...routine(
      'FUNCTION',
      '`reserve_ids`(n INT) RETURNS BIGINT UNSIGNED',
      `  NOT DETERMINISTIC MODIFIES SQL DATA
  COMMENT 'shardflake: reserves n counter values in one UPDATE, returns the first'
BEGIN
  DECLARE now_v BIGINT UNSIGNED DEFAULT ${nowV};
  DECLARE current_v BIGINT UNSIGNED;
  DECLARE message VARCHAR(255);
  IF n IS NULL OR n < 1 OR n > ${MAX_BATCH} THEN
    ${fail(`COUNT: n must be from 1 to ${MAX_BATCH}`)};
  END IF;
  UPDATE ${db}.\`sf_counter\`
     SET \`v\` = LAST_INSERT_ID(GREATEST(\`v\`, now_v) + n)
   WHERE \`k\` = 1
     AND GREATEST(\`v\`, now_v) + n <= now_v + ${driftV}
     AND GREATEST(\`v\`, now_v) + n <= ${limitV};
  IF ROW_COUNT() = 1 THEN
    RETURN LAST_INSERT_ID() - n;
  END IF;
  SELECT \`v\` INTO current_v FROM ${db}.\`sf_counter\` WHERE \`k\` = 1;
  IF current_v IS NULL THEN
    ${fail(`MISSING: the counter row of shard ${shard} is missing`)};
  END IF;
  IF current_v > ${limitV} THEN
    ${fail(`MOVED:logical shard ${shard} moved to another server (sf_meta.moved_to); update the shard map`)};
  END IF;
  IF GREATEST(current_v, now_v) + n > ${limitV} THEN
    ${fail(`EXHAUSTED: the time field of the layout is used up`)};
  END IF;
  SET message = CONCAT(${sqlString(`${SIGNAL_PREFIX}CLOCK:`)}, ((GREATEST(current_v, now_v) + n - now_v) >> ${S}) * ${unit},
    ':${o.maxDriftMs}: counter of shard ${shard} too far ahead of the clock');
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = message;
END`,
    ),
    ...routine(
      'FUNCTION',
      '`next_id`() RETURNS BIGINT',
      `  NOT DETERMINISTIC MODIFIES SQL DATA
  COMMENT 'shardflake: one new ID of shard ${shard}'
BEGIN
  DECLARE v BIGINT UNSIGNED DEFAULT ${db}.\`reserve_ids\`(1);
  RETURN ${compose('v')};
END`,
    ),
    ...routine(
      'PROCEDURE',
      '`next_ids`(IN n INT)',
      `  NOT DETERMINISTIC MODIFIES SQL DATA
  COMMENT 'shardflake: n new ascending IDs of shard ${shard} as one result set'
BEGIN
  DECLARE first_v BIGINT UNSIGNED DEFAULT ${db}.\`reserve_ids\`(n);
  SELECT ${compose(`first_v + ${offset}`)} AS \`id\`
    ${rows};
END`,
    ),
    ...routine(
      'PROCEDURE',
      '`generate_id`(IN shard_key BIGINT, OUT id BIGINT)',
      `  NOT DETERMINISTIC MODIFIES SQL DATA
  COMMENT 'shardflake: the seed''s procedure shape, made atomic'
BEGIN
  IF shard_key IS NULL OR MOD(shard_key, ${o.logicalShards}) <> ${shard} THEN
    ${fail(`SHARD: shard key mod ${o.logicalShards} is not ${shard}`)};
  END IF;
  SET id = ${db}.\`next_id\`();
END`,
    ),
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
RETURN CAST(id AS UNSIGNED) & ${mask}`,
    ),
    ...routine(
      'FUNCTION',
      '`id_unix_ms`(id BIGINT) RETURNS BIGINT',
      `  DETERMINISTIC NO SQL
RETURN ${layout.epoch} + ((CAST(id AS UNSIGNED) >> ${timeShift}) & ${(2n ** BigInt(layout.timeBits) - 1n).toString()}) * ${unit}`,
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

/**
 * The first counter value past the layout's time field. A counter at or below it is live; a
 * fenced counter (a shard moved away) holds `L + limit + 1`, where `L` was its last value. @internal
 */
export function counterLimit(layout: Layout): bigint {
  return BigInt(layout.timeLimit) << BigInt(layout.sequenceBits)
}

/**
 * The statements that **fence** a logical shard on its old server when it moves to another one
 * (what `moveMysqlShards` runs there, in this order):
 *
 * 1. `reserve_ids(n)` is replaced by a version that SIGNALs `shardflake:MOVED:...` (every drawing
 *    routine goes through it, so from here on nothing new is reserved by the routines);
 * 2. the move is recorded in `sf_meta` (`moved_to`, `moved_at`, and a `move_id` that the new home
 *    records as `arrived_by`), so that the installer and the install script refuse to bring the
 *    shard back to life here;
 * 3. `next_id()`, `next_ids(n)` and `generate_id(...)` are replaced likewise (same signatures:
 *    callers, INSERTs and triggers keep compiling and fail with the clear error);
 * 4. **the counter itself is fenced**, in one `UPDATE` under the engine's lock: its value `L`
 *    becomes `L + limit + 1`, past the end of the layout's time field. Any reserve that still runs
 *    an old body (a stored procedure keeps the routines it has already called cached for the rest
 *    of its `CALL`: replacing them neither waits for it nor reaches it) finds no room, issues
 *    nothing and SIGNALs `MOVED` (routines of this version) or `EXHAUSTED` (older ones). Every
 *    value ever issued here is below `L`, and `L` stays readable in the row;
 * 5. `L` is recorded as `sf_meta.moved_fence`.
 *
 * Every statement may be run again (a move that stopped half-way resumes). Pure: nothing is
 * executed. `destination` is a description of the new home for the error messages.
 *
 * @example
 * ```ts
 * for (const statement of mysqlFenceStatements({ layout: instagram }, 5, 'server db-b:3306')) {
 *   await connection.query(statement)
 * }
 * ```
 * @throws InvalidArgumentError for an empty destination, or one with control characters.
 */
export function mysqlFenceStatements(
  options: MysqlSqlOptions,
  shard: number,
  destination: string,
): string[] {
  const o = resolveSqlOptions(options)
  o.layout.checkShard(shard)
  return fenceStatements(o, shard, destination)
}

/** @internal */
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
  const moved = `${SIGNAL_PREFIX}MOVED:logical shard ${shard} moved to ${destination.slice(0, 60)}; update the shard map`
  const refuse = (kind: 'FUNCTION' | 'PROCEDURE', head: string) =>
    routine(
      kind,
      head,
      `  NOT DETERMINISTIC NO SQL
  COMMENT 'shardflake: logical shard ${shard} moved to another server'
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = ${sqlString(moved)};${kind === 'FUNCTION' ? '\n  RETURN NULL;' : ''}
END`,
    )
  return [
    ...refuse('FUNCTION', '`reserve_ids`(n INT) RETURNS BIGINT UNSIGNED'),
    `INSERT INTO ${db}.\`sf_meta\` (\`name\`, \`value\`) VALUES\n  ('moved_to', ${sqlString(destination)}),\n  ('moved_at', DATE_FORMAT(UTC_TIMESTAMP(), '%Y-%m-%dT%H:%i:%sZ')),\n  ('move_id', UUID())\nON DUPLICATE KEY UPDATE \`value\` = IF(\`name\` = 'moved_to', VALUES(\`value\`), \`value\`)`,
    ...refuse('FUNCTION', '`next_id`() RETURNS BIGINT'),
    ...refuse('PROCEDURE', '`next_ids`(IN n INT)'),
    ...refuse('PROCEDURE', '`generate_id`(IN shard_key BIGINT, OUT id BIGINT)'),
    `UPDATE ${db}.\`sf_counter\` SET \`v\` = \`v\` + ${offset} WHERE \`k\` = 1 AND \`v\` <= ${limitV}`,
    `INSERT INTO ${db}.\`sf_meta\` (\`name\`, \`value\`)\nSELECT 'moved_fence', CAST(\`v\` - ${offset} AS CHAR) FROM ${db}.\`sf_counter\` WHERE \`k\` = 1 AND \`v\` > ${limitV}\nON DUPLICATE KEY UPDATE \`value\` = CAST(GREATEST(CAST(\`value\` AS UNSIGNED), CAST(VALUES(\`value\`) AS UNSIGNED)) AS CHAR)`,
  ]
}

/** What {@link mysqlTriggerSql} takes. */
export interface MysqlTriggerOptions extends MysqlSqlOptions {
  /** The database of the table. */
  database: string
  /** The table whose rows get IDs. */
  table: string
  /** The logical shard whose `next_id()` fills the column. */
  shard: number
  /** @default 'id' */
  column?: string
}

/**
 * A BEFORE INSERT trigger that fills a NULL or 0 id with `shard_<n>.next_id()`, so plain SQL
 * inserts get IDs (MySQL cannot call a function in a column DEFAULT). Declare the column
 * `BIGINT NOT NULL DEFAULT 0` so rows may omit it. The trigger runs inside the INSERT, so with an
 * InnoDB counter its row lock lasts until that transaction commits.
 *
 * @example
 * ```ts
 * mysqlTriggerSql({ layout: instagram, database: 'app', table: 'posts', shard: 5 })
 * ```
 */
export function mysqlTriggerSql(options: MysqlTriggerOptions): string[] {
  const o = resolveSqlOptions(options)
  o.layout.checkShard(options.shard)
  const database = quoteIdentifier('database', options.database)
  const table = quoteIdentifier('table', options.table)
  const columnName = checkIdentifier('column', options.column ?? 'id')
  const column = `\`${columnName}\``
  const trigger = quoteIdentifier('trigger', `${options.table}_sf_${columnName}`.slice(0, 63))
  const shardDb = quoteIdentifier('database', shardDatabase(o.schemaPrefix, options.shard))
  const body = `BEFORE INSERT ON ${database}.${table} FOR EACH ROW
BEGIN
  IF NEW.${column} IS NULL OR NEW.${column} = 0 THEN
    SET NEW.${column} = ${shardDb}.\`next_id\`();
  END IF;
END`
  return o.dialect === 'mariadb'
    ? [`CREATE OR REPLACE TRIGGER ${database}.${trigger}\n${body}`]
    : [
        `DROP TRIGGER IF EXISTS ${database}.${trigger}`,
        `CREATE TRIGGER ${database}.${trigger}\n${body}`,
      ]
}

/** What {@link generateMysqlSql} takes. */
export interface GenerateMysqlSqlOptions extends MysqlSqlOptions {
  /** The logical shards to install (from `parseShardList`). */
  shards: readonly number[]
}

/**
 * A script for the `mysql`/`mariadb` command line client that installs every shard in `shards`
 * (statements separated with `DELIMITER`). Pure: nothing is executed.
 *
 * @example
 * ```ts
 * import { instagram, parseShardList } from '@shardflake/core'
 * import { generateMysqlSql } from '@shardflake/mysql'
 *
 * const script = generateMysqlSql({ layout: instagram, shards: parseShardList('0-3') })
 * // mariadb -uroot < script.sql
 * ```
 */
export function generateMysqlSql(options: GenerateMysqlSqlOptions): string {
  const o = resolveSqlOptions(options)
  if (options.shards.length === 0) throw new InvalidArgumentError('shards must not be empty.')
  for (const shard of options.shards) o.layout.checkShard(shard)
  const header = [
    `-- shardflake ${o.dialect} routines, layout ${o.layout.name} (${layoutKey(o.layout)})`,
    `-- shards ${options.shards.length === 1 ? options.shards[0] : `${options.shards[0]}..${options.shards[options.shards.length - 1]}`} (${options.shards.length}), database prefix ${o.schemaPrefix}`,
    '-- Re-runnable: the counters are kept; a different layout is refused.',
    'DELIMITER $$',
  ]
  const body = options.shards.map((shard) =>
    [`-- logical shard ${shard}`, ...shardStatements(o, shard).map((s) => `${s}$$`)].join('\n'),
  )
  return `${[...header, ...body, 'DELIMITER ;'].join('\n')}\n`
}
