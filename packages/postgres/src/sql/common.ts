import { type Ddl, MAX_KEY_LENGTH } from '@shardflake/core'
import { quoteIdentifier, quoteLiteral } from '../names'
import { asDdl } from './ddl'
import {
  numbers,
  type PostgresSqlOptions,
  type ResolvedSqlOptions,
  resolveSqlOptions,
  SQL_VERSION,
} from './options'

/**
 * Adds the columns that record a logical shard moved away from this database (idempotent). Part
 * of {@link commonSql}; run alone on a move's old home. @internal
 */
export function retirementColumnsScript(o: ResolvedSqlOptions): string {
  const c = quoteIdentifier('schema', o.schema)
  return `-- A logical shard moved to another database stays recorded here, fenced: when (retired_at), where
-- to (moved_to), and the highest value of its sequence this database can ever have issued
-- (fence_value). Installing it here again is refused; only a move brings it back.
ALTER TABLE ${c}.shards
  ADD COLUMN IF NOT EXISTS retired_at timestamptz,
  ADD COLUMN IF NOT EXISTS moved_to text,
  ADD COLUMN IF NOT EXISTS fence_value bigint;
`
}

/**
 * The SQL for what every shard shares: the common schema, the metadata (the sharding recorded,
 * refusing a different one with SQLSTATE `SF002`), the clock and the decode helpers.
 */
export function commonSql(options: PostgresSqlOptions): Ddl {
  return asDdl(commonScript(resolveSqlOptions(options, { where: 'commonSql options' })))
}

/** {@link commonSql} as one script. @internal */
export function commonScript(o: ResolvedSqlOptions): string {
  const { layout } = o
  const n = numbers(o)
  const c = quoteIdentifier('schema', o.schema)
  const description = JSON.stringify(layout.toJSON())
  const order = layout.order.join(',')
  const logical = o.sharding.logicalShards
  const field = (name: 'shard' | 'sequence' | 'worker', mask: bigint) =>
    `((id >> ${n.shifts[name]}) & ${mask})::integer`
  return `-- shardflake ${SQL_VERSION}: objects shared by all shards of layout ${JSON.stringify(layout.name)}
-- On Citus the common schema stays an ordinary schema on the coordinator, even with schema-based
-- sharding on (turned off for this transaction only; nothing happens without Citus).
DO $shardflake$
BEGIN
  IF current_setting('citus.enable_schema_based_sharding', true) IS NOT NULL THEN
    PERFORM set_config('citus.enable_schema_based_sharding', 'off', true);
  END IF;
END
$shardflake$;
${createSchemaScript(o.schema)}

CREATE TABLE IF NOT EXISTS ${c}.layout (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  name text NOT NULL,
  epoch_ms bigint NOT NULL,
  time_unit_ms integer NOT NULL,
  time_bits integer NOT NULL,
  shard_bits integer NOT NULL,
  worker_bits integer NOT NULL,
  sequence_bits integer NOT NULL,
  field_order text NOT NULL,
  description jsonb NOT NULL,
  version text NOT NULL,
  installed_at timestamptz NOT NULL DEFAULT now(),
  -- How many logical shards keys are spread over (Sharding.logicalShards).
  logical_shards integer CONSTRAINT layout_logical_shards_check CHECK (logical_shards > 0)
);
-- Installations from before logical_shards was recorded: the column, then its check, in two
-- statements (Citus refuses ADD COLUMN with a constraint on a distributed table).
DO $shardflake$
BEGIN
  IF NOT EXISTS (
    SELECT 1 FROM pg_catalog.pg_attribute
    WHERE attrelid = '${c}.layout'::regclass AND attname = 'logical_shards' AND NOT attisdropped
  ) THEN
    ALTER TABLE ${c}.layout ADD COLUMN logical_shards integer;
    ALTER TABLE ${c}.layout ADD CONSTRAINT layout_logical_shards_check CHECK (logical_shards > 0);
  END IF;
END
$shardflake$;

CREATE TABLE IF NOT EXISTS ${c}.shards (
  shard integer PRIMARY KEY,
  schema_name text NOT NULL UNIQUE,
  worker integer NOT NULL,
  sequence_cache integer NOT NULL,
  version text NOT NULL,
  installed_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  retired_at timestamptz,
  moved_to text,
  fence_value bigint
);

${retirementColumnsScript(o)}
-- Refuse a different sharding (layout or logical shards) over the recorded one: IDs would lose
-- their order and could repeat, and keys would land on other shards.
DO $shardflake$
DECLARE
  r record;
BEGIN
  LOCK TABLE ${c}.layout IN EXCLUSIVE MODE;
  SELECT * INTO r FROM ${c}.layout;
  IF NOT FOUND THEN
    INSERT INTO ${c}.layout (name, epoch_ms, time_unit_ms, time_bits, shard_bits, worker_bits, sequence_bits, field_order, description, version, logical_shards)
    VALUES (${quoteLiteral(layout.name)}, ${layout.epoch}, ${layout.timeUnitMs}, ${layout.timeBits}, ${layout.shardBits}, ${layout.workerBits}, ${layout.sequenceBits}, '${order}', ${quoteLiteral(description)}::jsonb, '${SQL_VERSION}', ${logical});
  ELSIF (r.epoch_ms, r.time_unit_ms, r.time_bits, r.shard_bits, r.worker_bits, r.sequence_bits, r.field_order, coalesce(r.logical_shards, ${logical}))
        IS DISTINCT FROM (${layout.epoch}::bigint, ${layout.timeUnitMs}, ${layout.timeBits}, ${layout.shardBits}, ${layout.workerBits}, ${layout.sequenceBits}, '${order}'::text, ${logical}) THEN
    RAISE EXCEPTION USING ERRCODE = 'SF002',
      MESSAGE = format('shardflake: schema %s already holds layout %s (epoch %s, %s/%s/%s/%s bits, %s ms unit) with logicalShards %s; refusing to install layout %s (epoch %s, %s/%s/%s/%s bits, %s ms unit) with logicalShards ${logical} over it: IDs would lose their order and could repeat, and keys would land on other shards',
        ${quoteLiteral(o.schema)}, r.name, r.epoch_ms, r.time_bits, r.shard_bits, r.worker_bits, r.sequence_bits, r.time_unit_ms, r.logical_shards,
        ${quoteLiteral(layout.name)}, ${layout.epoch}, ${layout.timeBits}, ${layout.shardBits}, ${layout.workerBits}, ${layout.sequenceBits}, ${layout.timeUnitMs});
  ELSIF r.logical_shards IS NULL THEN
    UPDATE ${c}.layout SET logical_shards = ${logical};
  END IF;
END
$shardflake$;

-- The clock next_id() reads, in ms since 1970. Tests replace it to step the clock back.
CREATE OR REPLACE FUNCTION ${c}.now_ms() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
  SELECT floor(date_part('epoch', clock_timestamp()) * 1000)::bigint
$$;

${shardForKeyScript(o)}
-- Decode helpers: the time, shard and sequence an ID carries (signed or not).
CREATE OR REPLACE FUNCTION ${c}.shardflake_timestamp(id bigint) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT to_timestamp(((((id >> ${n.shifts.time}) & ${n.timeMask}) * ${n.unit} + ${n.epoch})::double precision) / 1000)
$$;

CREATE OR REPLACE FUNCTION ${c}.shardflake_shard(id bigint) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT ${field('shard', n.shardMask)}
$$;

CREATE OR REPLACE FUNCTION ${c}.shardflake_sequence(id bigint) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT ${field('sequence', n.seqMask)}
$$;
${
  layout.workerBits > 0
    ? `
CREATE OR REPLACE FUNCTION ${c}.shardflake_worker(id bigint) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT ${field('worker', n.workerMask)}
$$;
`
    : ''
}`
}

/**
 * `CREATE SCHEMA` only when the schema does not exist yet. (`CREATE SCHEMA IF NOT EXISTS` on an
 * existing schema is not a no-op everywhere: with Citus's `citus.enable_schema_based_sharding` on,
 * it registers that schema as a distributed schema.) @internal
 */
export function createSchemaScript(name: string): string {
  return `DO $shardflake$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = ${quoteLiteral(name)}) THEN
    CREATE SCHEMA ${quoteIdentifier('schema', name)};
  END IF;
END
$shardflake$;`
}

/** White space that makes a key blank: what JavaScript's `String.prototype.trim` removes. */
const BLANK_CLASS =
  '\\u0009-\\u000d\\u0020\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff'

/**
 * `shard_for_key(text [, mode])` and `shard_for_key(numeric)`: the logical shard of a key, the
 * same as core's `shardForKey`, refusing the same keys (SF008 missing, SF009 outside the domain).
 * @internal
 */
function shardForKeyScript(o: ResolvedSqlOptions): string {
  const c = quoteIdentifier('schema', o.schema)
  const n = o.sharding.logicalShards
  const missing = (what: string) => `RAISE EXCEPTION USING ERRCODE = 'SF008', MESSAGE = ${what}`
  const invalid = (what: string) => `RAISE EXCEPTION USING ERRCODE = 'SF009', MESSAGE = ${what}`
  const nullKey = `'shardflake: the shard key is missing (NULL): set it before inserting'`
  return `-- The logical shard of a shard key, as shardForKey in @shardflake/core computes it: integers
-- of any width (numeric, or text of ASCII digits with an optional leading '-' in mode 'auto')
-- by key mod ${n}, made non-negative; any other text by 32-bit FNV-1a of its UTF-8 bytes
-- mod ${n}. NULL, '' and white space only: SQLSTATE SF008. Text over ${MAX_KEY_LENGTH} characters, a
-- numeric that is not an integer (a fraction, NaN, infinity): SF009. Keys are not folded or
-- trimmed: 'ACME', 'acme' and 'acme ' are three keys.
CREATE OR REPLACE FUNCTION ${c}.shard_for_key(shard_key numeric) RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF shard_key IS NULL THEN
    ${missing(nullKey)};
  END IF;
  IF shard_key = 'NaN' OR shard_key::text IN ('Infinity', '-Infinity') OR shard_key <> trunc(shard_key) THEN
    ${invalid(`format('shardflake: the shard key %s is not an integer; round it, or hash it as text with key_mode ''hash''', shard_key)`)};
  END IF;
  RETURN (((shard_key % ${n}) + ${n}) % ${n})::integer;
END
$$;

CREATE OR REPLACE FUNCTION ${c}.shard_for_key(shard_key text, key_mode text DEFAULT 'auto') RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  bytes bytea;
  h bigint := 2166136261;
  v numeric;
BEGIN
  IF key_mode IS NULL OR key_mode NOT IN ('auto', 'hash') THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('shardflake: key_mode must be ''auto'' or ''hash'', got %s', coalesce(quote_literal(key_mode), 'NULL'));
  END IF;
  IF shard_key IS NULL THEN
    ${missing(nullKey)};
  END IF;
  IF char_length(shard_key) > ${MAX_KEY_LENGTH} THEN
    ${invalid(`format('shardflake: the shard key is %s characters long; shard keys are at most ${MAX_KEY_LENGTH}', char_length(shard_key))`)};
  END IF;
  IF shard_key ~ '^[${BLANK_CLASS}]*$' THEN
    ${missing(`'shardflake: the shard key is empty or only white space: every row without a key would land on one shard; set it before inserting'`)};
  END IF;
  IF key_mode = 'auto' AND shard_key ~ '^-?[0-9]+$' THEN
    v := shard_key::numeric;
    RETURN (((v % ${n}) + ${n}) % ${n})::integer;
  END IF;
  bytes := convert_to(shard_key, 'UTF8');
  FOR i IN 0 .. length(bytes) - 1 LOOP
    h := ((h # get_byte(bytes, i)) * 16777619) & 4294967295;
  END LOOP;
  RETURN (h % ${n})::integer;
END
$$;
`
}
