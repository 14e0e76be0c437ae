-- shardflake 8: objects shared by all shards of layout "instagram"
-- On Citus the common schema stays an ordinary schema on the coordinator, even with schema-based
-- sharding on (turned off for this transaction only; nothing happens without Citus).
DO $shardflake$
BEGIN
  IF current_setting('citus.enable_schema_based_sharding', true) IS NOT NULL THEN
    PERFORM set_config('citus.enable_schema_based_sharding', 'off', true);
  END IF;
END
$shardflake$;

DO $shardflake$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = 'shardflake') THEN
    CREATE SCHEMA "shardflake";
  END IF;
END
$shardflake$;

CREATE TABLE IF NOT EXISTS "shardflake".layout (
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
    WHERE attrelid = '"shardflake".layout'::regclass AND attname = 'logical_shards' AND NOT attisdropped
  ) THEN
    ALTER TABLE "shardflake".layout ADD COLUMN logical_shards integer;
    ALTER TABLE "shardflake".layout ADD CONSTRAINT layout_logical_shards_check CHECK (logical_shards > 0);
  END IF;
END
$shardflake$;

CREATE TABLE IF NOT EXISTS "shardflake".shards (
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

-- A logical shard moved to another database stays recorded here, fenced: when (retired_at), where
-- to (moved_to), and the highest value of its sequence this database can ever have issued
-- (fence_value). Installing it here again is refused; only a move brings it back.
ALTER TABLE "shardflake".shards
  ADD COLUMN IF NOT EXISTS retired_at timestamptz,
  ADD COLUMN IF NOT EXISTS moved_to text,
  ADD COLUMN IF NOT EXISTS fence_value bigint;

-- Refuse a different sharding (layout or logical shards) over the recorded one: IDs would lose
-- their order and could repeat, and keys would land on other shards.
DO $shardflake$
DECLARE
  r record;
BEGIN
  LOCK TABLE "shardflake".layout IN EXCLUSIVE MODE;
  SELECT * INTO r FROM "shardflake".layout;
  IF NOT FOUND THEN
    INSERT INTO "shardflake".layout (name, epoch_ms, time_unit_ms, time_bits, shard_bits, worker_bits, sequence_bits, field_order, description, version, logical_shards)
    VALUES ('instagram', 1314220021721, 1, 41, 13, 0, 10, 'time,shard,worker,sequence', '{"name":"instagram","epoch":1314220021721,"epochIso":"2011-08-24T21:07:01.721Z","timeUnitMs":1,"timeBits":41,"shardBits":13,"workerBits":0,"sequenceBits":10,"order":["time","shard","worker","sequence"],"allowSignBit":false,"capacityPerMs":1024,"timeEndsAt":"2081-04-30T12:54:37.273Z","negativeFrom":"2046-06-27T17:00:49.497Z"}'::jsonb, '8', 2000);
  ELSIF (r.epoch_ms, r.time_unit_ms, r.time_bits, r.shard_bits, r.worker_bits, r.sequence_bits, r.field_order, coalesce(r.logical_shards, 2000))
        IS DISTINCT FROM (1314220021721::bigint, 1, 41, 13, 0, 10, 'time,shard,worker,sequence'::text, 2000) THEN
    RAISE EXCEPTION USING ERRCODE = 'SF002',
      MESSAGE = format('shardflake: schema %s already holds layout %s (epoch %s, %s/%s/%s/%s bits, %s ms unit) with logicalShards %s; refusing to install layout %s (epoch %s, %s/%s/%s/%s bits, %s ms unit) with logicalShards 2000 over it: IDs would lose their order and could repeat, and keys would land on other shards',
        'shardflake', r.name, r.epoch_ms, r.time_bits, r.shard_bits, r.worker_bits, r.sequence_bits, r.time_unit_ms, r.logical_shards,
        'instagram', 1314220021721, 41, 13, 0, 10, 1);
  ELSIF r.logical_shards IS NULL THEN
    UPDATE "shardflake".layout SET logical_shards = 2000;
  END IF;
END
$shardflake$;

-- The clock next_id() reads, in ms since 1970. Tests replace it to step the clock back.
CREATE OR REPLACE FUNCTION "shardflake".now_ms() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
  SELECT floor(date_part('epoch', clock_timestamp()) * 1000)::bigint
$$;

-- The logical shard of a shard key, as shardForKey in @shardflake/core computes it: integers
-- of any width (numeric, or text of ASCII digits with an optional leading '-' in mode 'auto')
-- by key mod 2000, made non-negative; any other text by 32-bit FNV-1a of its UTF-8 bytes
-- mod 2000. NULL, '' and white space only: SQLSTATE SF008. Text over 1024 characters, a
-- numeric that is not an integer (a fraction, NaN, infinity): SF009. Keys are not folded or
-- trimmed: 'ACME', 'acme' and 'acme ' are three keys.
CREATE OR REPLACE FUNCTION "shardflake".shard_for_key(shard_key numeric) RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF shard_key IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'SF008', MESSAGE = 'shardflake: the shard key is missing (NULL): set it before inserting';
  END IF;
  IF shard_key = 'NaN' OR shard_key::text IN ('Infinity', '-Infinity') OR shard_key <> trunc(shard_key) THEN
    RAISE EXCEPTION USING ERRCODE = 'SF009', MESSAGE = format('shardflake: the shard key %s is not an integer; round it, or hash it as text with key_mode ''hash''', shard_key);
  END IF;
  RETURN (((shard_key % 2000) + 2000) % 2000)::integer;
END
$$;

CREATE OR REPLACE FUNCTION "shardflake".shard_for_key(shard_key text, key_mode text DEFAULT 'auto') RETURNS integer
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
    RAISE EXCEPTION USING ERRCODE = 'SF008', MESSAGE = 'shardflake: the shard key is missing (NULL): set it before inserting';
  END IF;
  IF char_length(shard_key) > 1024 THEN
    RAISE EXCEPTION USING ERRCODE = 'SF009', MESSAGE = format('shardflake: the shard key is %s characters long; shard keys are at most 1024', char_length(shard_key));
  END IF;
  IF shard_key ~ '^[\u0009-\u000d\u0020\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]*$' THEN
    RAISE EXCEPTION USING ERRCODE = 'SF008', MESSAGE = 'shardflake: the shard key is empty or only white space: every row without a key would land on one shard; set it before inserting';
  END IF;
  IF key_mode = 'auto' AND shard_key ~ '^-?[0-9]+$' THEN
    v := shard_key::numeric;
    RETURN (((v % 2000) + 2000) % 2000)::integer;
  END IF;
  bytes := convert_to(shard_key, 'UTF8');
  FOR i IN 0 .. length(bytes) - 1 LOOP
    h := ((h # get_byte(bytes, i)) * 16777619) & 4294967295;
  END LOOP;
  RETURN (h % 2000)::integer;
END
$$;

-- Decode helpers: the time, shard and sequence an ID carries (signed or not).
CREATE OR REPLACE FUNCTION "shardflake".shardflake_timestamp(id bigint) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT to_timestamp(((((id >> 23) & 2199023255551) * 1 + 1314220021721)::double precision) / 1000)
$$;

CREATE OR REPLACE FUNCTION "shardflake".shardflake_shard(id bigint) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT ((id >> 10) & 8191)::integer
$$;

CREATE OR REPLACE FUNCTION "shardflake".shardflake_sequence(id bigint) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT ((id >> 0) & 1023)::integer
$$;

-- shardflake 8: logical shard 5 of layout "instagram"
DO $shardflake$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = 'shard_5') THEN
    CREATE SCHEMA "shard_5";
  END IF;
END
$shardflake$;

-- Version 5 and earlier moved the sequence under a session-level lock let go by an error handler
-- (which Citus cannot run inside a distributed statement). Waits for such a move running now.
SELECT pg_advisory_xact_lock(-573691797, 5);

DROP FUNCTION IF EXISTS "shard_5"._unlock();

DO $shardflake$
BEGIN
  IF EXISTS (SELECT 1 FROM "shardflake".shards WHERE shard = 5 AND schema_name <> 'shard_5') THEN
    RAISE EXCEPTION USING ERRCODE = 'SF003',
      MESSAGE = format('shardflake: logical shard 5 is already installed in schema %s, not shard_5: one shard must have one source', (SELECT schema_name FROM "shardflake".shards WHERE shard = 5));
  END IF;
END
$shardflake$;

-- Counts in ID space: value = time << 10 | sequence. MAXVALUE is the end of the layout's time.
-- A new shard starts at the clock, so that its first IDs carry the time they are made.
DO $shardflake$
BEGIN
  IF to_regclass('"shard_5".id_seq') IS NULL THEN
    EXECUTE format('CREATE SEQUENCE "shard_5".id_seq AS bigint MINVALUE 0 MAXVALUE 1125899906842623 START %s CACHE 1 NO CYCLE',
      greatest(0, least((("shardflake".now_ms() - 1314220021721) << 10) - 1, 1125899906842623)));
  END IF;
END
$shardflake$;

-- A shard moved away from this database keeps its fence (MAXVALUE at the last value it may have
-- issued): refused here, before the ALTER that would lift it, and again after it (the ALTER waits
-- for a fence being set meanwhile, and each statement here sees what committed before it).
DO $shardflake$
BEGIN
  IF EXISTS (SELECT 1 FROM "shardflake".shards WHERE shard = 5 AND retired_at IS NOT NULL) THEN
    RAISE EXCEPTION USING ERRCODE = 'SF005',
      MESSAGE = format('shardflake: logical shard 5 moved from this database to another one%s%s; installing it here again would issue IDs the new home issues too. To bring it back, move it back (movePostgresShards).', (SELECT coalesce(' (' || moved_to || ')', '') FROM "shardflake".shards WHERE shard = 5), (SELECT ' on ' || retired_at FROM "shardflake".shards WHERE shard = 5));
  END IF;
  ALTER SEQUENCE "shard_5".id_seq MAXVALUE 1125899906842623 CACHE 1;
  IF EXISTS (SELECT 1 FROM "shardflake".shards WHERE shard = 5 AND retired_at IS NOT NULL) THEN
    RAISE EXCEPTION USING ERRCODE = 'SF005',
      MESSAGE = format('shardflake: logical shard 5 moved from this database to another one%s%s; installing it here again would issue IDs the new home issues too. To bring it back, move it back (movePostgresShards).', (SELECT coalesce(' (' || moved_to || ')', '') FROM "shardflake".shards WHERE shard = 5), (SELECT ' on ' || retired_at FROM "shardflake".shards WHERE shard = 5));
  END IF;
END
$shardflake$;

-- Seqlock generation: NULL (not called) while the sequence is being moved forward.
CREATE SEQUENCE IF NOT EXISTS "shard_5".id_gen AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;

CREATE OR REPLACE FUNCTION "shard_5"._compose(v bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT ((v >> 10) << 23) | (5120)::bigint | ((v & 1023) << 0)
$$;

-- Raises SF007: the layout's time field is used up (the sequence cannot follow the clock).
CREATE OR REPLACE FUNCTION "shard_5"._exhausted() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'SF007',
    MESSAGE = 'shardflake: shard 5: the time field of the layout ran out on 2046-06-27T17:00:49.497Z: no more IDs can be made. Define a layout with a later epoch. No ID was issued.';
END
$$;

-- Called by a draw that found the sequence more than the margin behind the clock: moves it
-- forward to the clock, or waits (at most maxWaitMs) while another session moves it. True: draw
-- again, the sequence is where it should be (or is being moved). False when the move lock of the
-- generation stayed taken that long (or did so earlier in this transaction), or this transaction
-- already made 256 moves: the caller keeps what it drew (unique, but older).
CREATE OR REPLACE FUNCTION "shard_5"._catch_up() RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  last bigint;
  target bigint;
  waited integer := 0;
BEGIN
  IF coalesce(nullif(current_setting('shardflake.moves', true), ''), '0')::integer >= 256 THEN
    RETURN false;
  END IF;
  LOOP
    g := pg_sequence_last_value('"shard_5".id_gen'::regclass);
    IF g IS NULL THEN
      -- A move in progress (or one to repair): the draw starts again and waits for it.
      RETURN true;
    END IF;
    IF coalesce(pg_sequence_last_value('"shard_5".id_seq'::regclass), -1) >= (("shardflake".now_ms() - 1314220021721) << 10) - 51200 THEN
      -- Another session moved it already: draw again, without a move of our own.
      RETURN true;
    END IF;
    EXIT WHEN pg_try_advisory_xact_lock(-573691797, ((g) % 32768 * 65536 + 5)::integer);
    -- At most once per transaction: a mover blocked behind a fence (movePostgresShards) would
    -- otherwise cost every row of a multi-row INSERT the whole wait.
    IF waited >= 100 OR current_setting('shardflake.gave_up_waiting', true) = 'yes' THEN
      PERFORM set_config('shardflake.gave_up_waiting', 'yes', true);
      RETURN false;
    END IF;
    PERFORM pg_sleep(0.001);
    waited := waited + 1;
  END LOOP;
  PERFORM set_config('shardflake.moves', (coalesce(nullif(current_setting('shardflake.moves', true), ''), '0')::integer + 1)::text, true);
  IF pg_sequence_last_value('"shard_5".id_gen'::regclass) IS DISTINCT FROM g THEN
    -- Another session moved the sequence since: draw again.
    RETURN true;
  END IF;
  -- From here to the new generation every draw is discarded by its seqlock check.
  PERFORM setval('"shard_5".id_gen'::regclass, g, false);
  -- (A sequence never drawn from counts as -1, as the draws' own check sees it.)
  SELECT CASE WHEN is_called THEN last_value ELSE -1 END INTO last FROM "shard_5".id_seq;
  target := (("shardflake".now_ms() - 1314220021721) << 10) - 1;
  IF target > 1125899906842623 THEN
    PERFORM "shard_5"._exhausted();
  END IF;
  IF last < target - 51200 + 1 THEN
    PERFORM setval('"shard_5".id_seq'::regclass, target, true);
  END IF;
  -- A new generation (also when nothing moved): the move is over.
  PERFORM setval('"shard_5".id_gen'::regclass, g + 1, true);
  RETURN true;
END
$$;

-- Waits while another session moves the sequence (id_gen "not called"), polling (1-2 ms), until the move
-- ends. Repairs id_gen left "not called" by a move whose transaction ended half-way (an error, a
-- cancel, a session that died): the move lock of that generation is free again, and it goes on to
-- the next generation under it. Only that generation: between the read and the lock, another
-- session may have repaired it and begun a move of the next one, whose lock it holds; ending that
-- live move here would let a third session move the sequence from the same last value.
CREATE OR REPLACE FUNCTION "shard_5"._wait_gen() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  now_g bigint;
  called boolean;
  pause double precision := 0.001;
BEGIN
  LOOP
    SELECT last_value, is_called INTO g, called FROM "shard_5".id_gen;
    IF called THEN
      RETURN;
    END IF;
    IF pg_try_advisory_xact_lock(-573691797, ((g) % 32768 * 65536 + 5)::integer) THEN
      PERFORM set_config('shardflake.moves', (coalesce(nullif(current_setting('shardflake.moves', true), ''), '0')::integer + 1)::text, true);
      SELECT last_value, is_called INTO now_g, called FROM "shard_5".id_gen;
      IF called THEN
        RETURN;
      END IF;
      IF now_g = g THEN
        PERFORM setval('"shard_5".id_gen'::regclass, g + 1, true);
        RETURN;
      END IF;
      -- A move of a later generation is running: wait for it.
    END IF;
    PERFORM pg_sleep(pause);
    pause := least(pause * 2, 0.002);
  END LOOP;
END
$$;

-- Waits until the value's time is at most maxDriftMs ahead of the clock, or fails (SF001).
CREATE OR REPLACE FUNCTION "shard_5"._throttle(v bigint) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  ahead bigint;
  waited bigint := 0;
BEGIN
  LOOP
    ahead := ((v >> 10) * 1 + 1314220021721) - "shardflake".now_ms() - 1000;
    EXIT WHEN ahead <= 0;
    IF waited + ahead > 100 THEN
      RAISE EXCEPTION USING ERRCODE = 'SF001',
        MESSAGE = format('shardflake: shard 5: the sequence is %s ms ahead of the clock (%s ms allowed, waited %s ms of at most 100): the clock stepped back, or IDs were drawn faster than 1024 per ms for longer than the drift allows. No ID was issued.', ahead + 1000, 1000, waited),
        DETAIL = json_build_object('aheadMs', ahead + 1000, 'maxDriftMs', 1000, 'waitedMs', waited, 'maxWaitMs', 100)::text,
        HINT = 'Check the clock (NTP slew, not step), or draw fewer IDs per ms from this shard.';
    END IF;
    PERFORM pg_sleep(ahead / 1000.0);
    waited := waited + ahead;
  END LOOP;
END
$$;

-- Reserves n consecutive values of the sequence in a constant number of sequence operations and
-- returns the first: a move of the sequence like a catch-up (lock, id_gen "not called", the real
-- last value, setval, a new generation), to the end of the range instead of to the clock. The
-- range starts after the last value, or at the clock when that is more than the margin behind.
-- Waits (polling) while another session moves the sequence: no draw succeeds meanwhile anyway.
CREATE OR REPLACE FUNCTION "shard_5"._reserve(n integer) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  last bigint;
  nv bigint;
  first bigint;
  refused boolean := false;
BEGIN
  LOOP
    g := pg_sequence_last_value('"shard_5".id_gen'::regclass);
    IF g IS NULL THEN
      PERFORM "shard_5"._wait_gen();
    ELSIF pg_try_advisory_xact_lock(-573691797, ((g) % 32768 * 65536 + 5)::integer) THEN
      PERFORM set_config('shardflake.moves', (coalesce(nullif(current_setting('shardflake.moves', true), ''), '0')::integer + 1)::text, true);
      EXIT WHEN pg_sequence_last_value('"shard_5".id_gen'::regclass) IS NOT DISTINCT FROM g;
    ELSE
      PERFORM pg_sleep(0.001);
    END IF;
  END LOOP;
  -- From here to the new generation every draw is discarded by its seqlock check.
  PERFORM setval('"shard_5".id_gen'::regclass, g, false);
  SELECT last_value INTO last FROM "shard_5".id_seq;
  nv := (("shardflake".now_ms() - 1314220021721) << 10);
  first := CASE WHEN last < nv - 51200 THEN nv ELSE last + 1 END;
  -- A range ending further ahead than the wait for the clock may cover is refused unmoved.
  refused := first + n - 1 > nv + 1126400;
  IF NOT refused AND first + n - 1 > 1125899906842623 THEN
    PERFORM "shard_5"._exhausted();
  END IF;
  IF NOT refused THEN
    PERFORM setval('"shard_5".id_seq'::regclass, first + n - 1, true);
  END IF;
  PERFORM setval('"shard_5".id_gen'::regclass, g + 1, true);
  IF refused AND n > 1126400 THEN
    -- The batch alone is more than the shard makes within the drift and the wait: overload.
    RAISE EXCEPTION USING ERRCODE = 'SF006',
      MESSAGE = format('shardflake: shard 5: next_ids(%s) refused: the shard makes 1024 IDs per ms and may run 1000 ms ahead of the clock (and wait 100 ms), at most 1126400 IDs in one call. Ask for fewer IDs per call, spread the rows over more shards, or install with a larger maxDriftMs. The clock is fine; no ID was issued.', n),
      DETAIL = json_build_object('count', n, 'maxIds', 1126400, 'maxDriftMs', 1000, 'maxWaitMs', 100)::text;
  ELSIF refused THEN
    RAISE EXCEPTION USING ERRCODE = 'SF001',
      MESSAGE = format('shardflake: shard 5: next_ids(%s) refused: its last ID would be %s ms ahead of the clock (%s ms allowed, at most 100 ms of wait): earlier calls drew faster than 1024 IDs per ms, or the clock stepped back. Ask for fewer IDs per call. No ID was issued.', n, (((first + n - 1) >> 10) - (nv >> 10)) * 1, 1000),
      DETAIL = json_build_object('aheadMs', (((first + n - 1) >> 10) - (nv >> 10)) * 1, 'maxDriftMs', 1000, 'waitedMs', 0, 'maxWaitMs', 100)::text;
  END IF;
  IF first + n - 1 > nv + 1024000 THEN
    PERFORM "shard_5"._throttle(first + n - 1);
  END IF;
  RETURN first;
END
$$;

-- Moves the sequence to at least v, never backwards, and returns where it is: the last step of
-- moving the shard here from another database whose sequence was fenced at v, so that every value
-- issued here from now on is above every value the old home ever issued. A move like _reserve
-- (lock, id_gen "not called", the real last value, setval, a new generation): draws running here
-- meanwhile are drawn again.
CREATE OR REPLACE FUNCTION "shard_5"._advance_to(v bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  last bigint;
BEGIN
  IF v IS NULL OR v < 0 OR v > 1125899906842623 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('shardflake: shard 5: _advance_to(v) needs v from 0 to 1125899906842623, got %s', v);
  END IF;
  LOOP
    g := pg_sequence_last_value('"shard_5".id_gen'::regclass);
    IF g IS NULL THEN
      PERFORM "shard_5"._wait_gen();
    ELSIF pg_try_advisory_xact_lock(-573691797, ((g) % 32768 * 65536 + 5)::integer) THEN
      PERFORM set_config('shardflake.moves', (coalesce(nullif(current_setting('shardflake.moves', true), ''), '0')::integer + 1)::text, true);
      EXIT WHEN pg_sequence_last_value('"shard_5".id_gen'::regclass) IS NOT DISTINCT FROM g;
    ELSE
      PERFORM pg_sleep(0.001);
    END IF;
  END LOOP;
  -- From here to the new generation every draw is discarded by its seqlock check.
  PERFORM setval('"shard_5".id_gen'::regclass, g, false);
  SELECT greatest(last_value, v) INTO last FROM "shard_5".id_seq;
  PERFORM setval('"shard_5".id_seq'::regclass, last, true);
  PERFORM setval('"shard_5".id_gen'::regclass, g + 1, true);
  RETURN last;
END
$$;

-- n new IDs of shard 5, ascending, in one call: from 128 on a reserved range,
-- below that n draws (also beyond 256 moves in one transaction).
CREATE OR REPLACE FUNCTION "shard_5".next_ids(n integer) RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g1 bigint;
  g2 bigint;
  vs bigint[];
  nv bigint;
  first bigint;
  tries integer := 0;
BEGIN
  IF n IS NULL OR n < 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('shardflake: next_ids(n) needs n >= 1, got %s', n);
  END IF;
  IF n >= 128 AND coalesce(nullif(current_setting('shardflake.moves', true), ''), '0')::integer < 256 THEN
    first := "shard_5"._reserve(n);
    RETURN QUERY SELECT "shard_5"._compose(v) FROM generate_series(first, first + n - 1) AS v;
    RETURN;
  END IF;
  LOOP
    tries := tries + 1;
    IF tries > 1000 THEN
      RAISE EXCEPTION USING ERRCODE = 'SF004', MESSAGE = 'shardflake: shard 5: could not draw IDs in 1000 attempts';
    END IF;
    g1 := pg_sequence_last_value('"shard_5".id_gen'::regclass);
    IF g1 IS NULL THEN
      PERFORM "shard_5"._wait_gen();
      CONTINUE;
    END IF;
    nv := (("shardflake".now_ms() - 1314220021721) << 10);
    IF coalesce(pg_sequence_last_value('"shard_5".id_seq'::regclass), -1) < nv - 51200 AND "shard_5"._catch_up() THEN
      CONTINUE;
    END IF;
    vs := ARRAY(SELECT nextval('"shard_5".id_seq'::regclass) FROM generate_series(1, n));
    g2 := pg_sequence_last_value('"shard_5".id_gen'::regclass);
    IF g2 IS DISTINCT FROM g1 THEN
      CONTINUE;
    END IF;
    nv := (("shardflake".now_ms() - 1314220021721) << 10);
    IF vs[1] < nv - 51200 AND "shard_5"._catch_up() THEN
      CONTINUE;
    END IF;
    IF vs[n] > nv + 1024000 THEN
      PERFORM "shard_5"._throttle(vs[n]);
    END IF;
    RETURN QUERY SELECT "shard_5"._compose(v) FROM unnest(vs) AS v;
    RETURN;
  END LOOP;
END
$$;

-- The slow path of next_id(): the draw overlapped a move of the sequence, or the sequence is
-- behind or ahead of the clock.
CREATE OR REPLACE FUNCTION "shard_5"._settle(g1 bigint, v bigint, g2 bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  nv bigint;
BEGIN
  IF g1 = g2 THEN
    nv := (("shardflake".now_ms() - 1314220021721) << 10);
    IF v < nv - 51200 THEN
      IF "shard_5"._catch_up() THEN
        RETURN (SELECT x FROM "shard_5".next_ids(1) AS x);
      END IF;
    ELSIF v > nv + 1024000 THEN
      PERFORM "shard_5"._throttle(v);
    END IF;
    RETURN "shard_5"._compose(v);
  END IF;
  RETURN (SELECT x FROM "shard_5".next_ids(1) AS x);
END
$$;

-- The fast path of next_id(): one expression (the draw was not overlapped by a move, and the
-- value is within the margin behind and the drift ahead of the clock), else the slow path.
CREATE OR REPLACE FUNCTION "shard_5"._accept(g1 bigint, v bigint, g2 bigint, now_ms bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RETURN CASE
    WHEN g1 = g2 AND v - ((now_ms - 1314220021721) << 10) BETWEEN -51200 AND 1024000 THEN ((v >> 10) << 23) | (5120)::bigint | ((v & 1023) << 0)
    ELSE "shard_5"._settle(g1, v, g2)
  END;
END
$$;

-- One new ID of shard 5; use it as the column DEFAULT. Inlined into the caller's plan:
-- the arguments are evaluated in order (generation, nextval, generation, clock).
CREATE OR REPLACE FUNCTION "shard_5".next_id() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
  SELECT "shard_5"._accept(pg_sequence_last_value('"shard_5".id_gen'::regclass), nextval('"shard_5".id_seq'::regclass), pg_sequence_last_value('"shard_5".id_gen'::regclass), "shardflake".now_ms())
$$;

INSERT INTO "shardflake".shards (shard, schema_name, worker, sequence_cache, version)
VALUES (5, 'shard_5', 0, 1, '8')
ON CONFLICT (shard) DO UPDATE
  SET worker = EXCLUDED.worker, sequence_cache = EXCLUDED.sequence_cache, version = EXCLUDED.version, updated_at = now();

-- shardflake 8: logical shard 6 of layout "instagram"
DO $shardflake$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = 'shard_6') THEN
    CREATE SCHEMA "shard_6";
  END IF;
END
$shardflake$;

-- Version 5 and earlier moved the sequence under a session-level lock let go by an error handler
-- (which Citus cannot run inside a distributed statement). Waits for such a move running now.
SELECT pg_advisory_xact_lock(-573691797, 6);

DROP FUNCTION IF EXISTS "shard_6"._unlock();

DO $shardflake$
BEGIN
  IF EXISTS (SELECT 1 FROM "shardflake".shards WHERE shard = 6 AND schema_name <> 'shard_6') THEN
    RAISE EXCEPTION USING ERRCODE = 'SF003',
      MESSAGE = format('shardflake: logical shard 6 is already installed in schema %s, not shard_6: one shard must have one source', (SELECT schema_name FROM "shardflake".shards WHERE shard = 6));
  END IF;
END
$shardflake$;

-- Counts in ID space: value = time << 10 | sequence. MAXVALUE is the end of the layout's time.
-- A new shard starts at the clock, so that its first IDs carry the time they are made.
DO $shardflake$
BEGIN
  IF to_regclass('"shard_6".id_seq') IS NULL THEN
    EXECUTE format('CREATE SEQUENCE "shard_6".id_seq AS bigint MINVALUE 0 MAXVALUE 1125899906842623 START %s CACHE 1 NO CYCLE',
      greatest(0, least((("shardflake".now_ms() - 1314220021721) << 10) - 1, 1125899906842623)));
  END IF;
END
$shardflake$;

-- A shard moved away from this database keeps its fence (MAXVALUE at the last value it may have
-- issued): refused here, before the ALTER that would lift it, and again after it (the ALTER waits
-- for a fence being set meanwhile, and each statement here sees what committed before it).
DO $shardflake$
BEGIN
  IF EXISTS (SELECT 1 FROM "shardflake".shards WHERE shard = 6 AND retired_at IS NOT NULL) THEN
    RAISE EXCEPTION USING ERRCODE = 'SF005',
      MESSAGE = format('shardflake: logical shard 6 moved from this database to another one%s%s; installing it here again would issue IDs the new home issues too. To bring it back, move it back (movePostgresShards).', (SELECT coalesce(' (' || moved_to || ')', '') FROM "shardflake".shards WHERE shard = 6), (SELECT ' on ' || retired_at FROM "shardflake".shards WHERE shard = 6));
  END IF;
  ALTER SEQUENCE "shard_6".id_seq MAXVALUE 1125899906842623 CACHE 1;
  IF EXISTS (SELECT 1 FROM "shardflake".shards WHERE shard = 6 AND retired_at IS NOT NULL) THEN
    RAISE EXCEPTION USING ERRCODE = 'SF005',
      MESSAGE = format('shardflake: logical shard 6 moved from this database to another one%s%s; installing it here again would issue IDs the new home issues too. To bring it back, move it back (movePostgresShards).', (SELECT coalesce(' (' || moved_to || ')', '') FROM "shardflake".shards WHERE shard = 6), (SELECT ' on ' || retired_at FROM "shardflake".shards WHERE shard = 6));
  END IF;
END
$shardflake$;

-- Seqlock generation: NULL (not called) while the sequence is being moved forward.
CREATE SEQUENCE IF NOT EXISTS "shard_6".id_gen AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;

CREATE OR REPLACE FUNCTION "shard_6"._compose(v bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT ((v >> 10) << 23) | (6144)::bigint | ((v & 1023) << 0)
$$;

-- Raises SF007: the layout's time field is used up (the sequence cannot follow the clock).
CREATE OR REPLACE FUNCTION "shard_6"._exhausted() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'SF007',
    MESSAGE = 'shardflake: shard 6: the time field of the layout ran out on 2046-06-27T17:00:49.497Z: no more IDs can be made. Define a layout with a later epoch. No ID was issued.';
END
$$;

-- Called by a draw that found the sequence more than the margin behind the clock: moves it
-- forward to the clock, or waits (at most maxWaitMs) while another session moves it. True: draw
-- again, the sequence is where it should be (or is being moved). False when the move lock of the
-- generation stayed taken that long (or did so earlier in this transaction), or this transaction
-- already made 256 moves: the caller keeps what it drew (unique, but older).
CREATE OR REPLACE FUNCTION "shard_6"._catch_up() RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  last bigint;
  target bigint;
  waited integer := 0;
BEGIN
  IF coalesce(nullif(current_setting('shardflake.moves', true), ''), '0')::integer >= 256 THEN
    RETURN false;
  END IF;
  LOOP
    g := pg_sequence_last_value('"shard_6".id_gen'::regclass);
    IF g IS NULL THEN
      -- A move in progress (or one to repair): the draw starts again and waits for it.
      RETURN true;
    END IF;
    IF coalesce(pg_sequence_last_value('"shard_6".id_seq'::regclass), -1) >= (("shardflake".now_ms() - 1314220021721) << 10) - 51200 THEN
      -- Another session moved it already: draw again, without a move of our own.
      RETURN true;
    END IF;
    EXIT WHEN pg_try_advisory_xact_lock(-573691797, ((g) % 32768 * 65536 + 6)::integer);
    -- At most once per transaction: a mover blocked behind a fence (movePostgresShards) would
    -- otherwise cost every row of a multi-row INSERT the whole wait.
    IF waited >= 100 OR current_setting('shardflake.gave_up_waiting', true) = 'yes' THEN
      PERFORM set_config('shardflake.gave_up_waiting', 'yes', true);
      RETURN false;
    END IF;
    PERFORM pg_sleep(0.001);
    waited := waited + 1;
  END LOOP;
  PERFORM set_config('shardflake.moves', (coalesce(nullif(current_setting('shardflake.moves', true), ''), '0')::integer + 1)::text, true);
  IF pg_sequence_last_value('"shard_6".id_gen'::regclass) IS DISTINCT FROM g THEN
    -- Another session moved the sequence since: draw again.
    RETURN true;
  END IF;
  -- From here to the new generation every draw is discarded by its seqlock check.
  PERFORM setval('"shard_6".id_gen'::regclass, g, false);
  -- (A sequence never drawn from counts as -1, as the draws' own check sees it.)
  SELECT CASE WHEN is_called THEN last_value ELSE -1 END INTO last FROM "shard_6".id_seq;
  target := (("shardflake".now_ms() - 1314220021721) << 10) - 1;
  IF target > 1125899906842623 THEN
    PERFORM "shard_6"._exhausted();
  END IF;
  IF last < target - 51200 + 1 THEN
    PERFORM setval('"shard_6".id_seq'::regclass, target, true);
  END IF;
  -- A new generation (also when nothing moved): the move is over.
  PERFORM setval('"shard_6".id_gen'::regclass, g + 1, true);
  RETURN true;
END
$$;

-- Waits while another session moves the sequence (id_gen "not called"), polling (1-2 ms), until the move
-- ends. Repairs id_gen left "not called" by a move whose transaction ended half-way (an error, a
-- cancel, a session that died): the move lock of that generation is free again, and it goes on to
-- the next generation under it. Only that generation: between the read and the lock, another
-- session may have repaired it and begun a move of the next one, whose lock it holds; ending that
-- live move here would let a third session move the sequence from the same last value.
CREATE OR REPLACE FUNCTION "shard_6"._wait_gen() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  now_g bigint;
  called boolean;
  pause double precision := 0.001;
BEGIN
  LOOP
    SELECT last_value, is_called INTO g, called FROM "shard_6".id_gen;
    IF called THEN
      RETURN;
    END IF;
    IF pg_try_advisory_xact_lock(-573691797, ((g) % 32768 * 65536 + 6)::integer) THEN
      PERFORM set_config('shardflake.moves', (coalesce(nullif(current_setting('shardflake.moves', true), ''), '0')::integer + 1)::text, true);
      SELECT last_value, is_called INTO now_g, called FROM "shard_6".id_gen;
      IF called THEN
        RETURN;
      END IF;
      IF now_g = g THEN
        PERFORM setval('"shard_6".id_gen'::regclass, g + 1, true);
        RETURN;
      END IF;
      -- A move of a later generation is running: wait for it.
    END IF;
    PERFORM pg_sleep(pause);
    pause := least(pause * 2, 0.002);
  END LOOP;
END
$$;

-- Waits until the value's time is at most maxDriftMs ahead of the clock, or fails (SF001).
CREATE OR REPLACE FUNCTION "shard_6"._throttle(v bigint) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  ahead bigint;
  waited bigint := 0;
BEGIN
  LOOP
    ahead := ((v >> 10) * 1 + 1314220021721) - "shardflake".now_ms() - 1000;
    EXIT WHEN ahead <= 0;
    IF waited + ahead > 100 THEN
      RAISE EXCEPTION USING ERRCODE = 'SF001',
        MESSAGE = format('shardflake: shard 6: the sequence is %s ms ahead of the clock (%s ms allowed, waited %s ms of at most 100): the clock stepped back, or IDs were drawn faster than 1024 per ms for longer than the drift allows. No ID was issued.', ahead + 1000, 1000, waited),
        DETAIL = json_build_object('aheadMs', ahead + 1000, 'maxDriftMs', 1000, 'waitedMs', waited, 'maxWaitMs', 100)::text,
        HINT = 'Check the clock (NTP slew, not step), or draw fewer IDs per ms from this shard.';
    END IF;
    PERFORM pg_sleep(ahead / 1000.0);
    waited := waited + ahead;
  END LOOP;
END
$$;

-- Reserves n consecutive values of the sequence in a constant number of sequence operations and
-- returns the first: a move of the sequence like a catch-up (lock, id_gen "not called", the real
-- last value, setval, a new generation), to the end of the range instead of to the clock. The
-- range starts after the last value, or at the clock when that is more than the margin behind.
-- Waits (polling) while another session moves the sequence: no draw succeeds meanwhile anyway.
CREATE OR REPLACE FUNCTION "shard_6"._reserve(n integer) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  last bigint;
  nv bigint;
  first bigint;
  refused boolean := false;
BEGIN
  LOOP
    g := pg_sequence_last_value('"shard_6".id_gen'::regclass);
    IF g IS NULL THEN
      PERFORM "shard_6"._wait_gen();
    ELSIF pg_try_advisory_xact_lock(-573691797, ((g) % 32768 * 65536 + 6)::integer) THEN
      PERFORM set_config('shardflake.moves', (coalesce(nullif(current_setting('shardflake.moves', true), ''), '0')::integer + 1)::text, true);
      EXIT WHEN pg_sequence_last_value('"shard_6".id_gen'::regclass) IS NOT DISTINCT FROM g;
    ELSE
      PERFORM pg_sleep(0.001);
    END IF;
  END LOOP;
  -- From here to the new generation every draw is discarded by its seqlock check.
  PERFORM setval('"shard_6".id_gen'::regclass, g, false);
  SELECT last_value INTO last FROM "shard_6".id_seq;
  nv := (("shardflake".now_ms() - 1314220021721) << 10);
  first := CASE WHEN last < nv - 51200 THEN nv ELSE last + 1 END;
  -- A range ending further ahead than the wait for the clock may cover is refused unmoved.
  refused := first + n - 1 > nv + 1126400;
  IF NOT refused AND first + n - 1 > 1125899906842623 THEN
    PERFORM "shard_6"._exhausted();
  END IF;
  IF NOT refused THEN
    PERFORM setval('"shard_6".id_seq'::regclass, first + n - 1, true);
  END IF;
  PERFORM setval('"shard_6".id_gen'::regclass, g + 1, true);
  IF refused AND n > 1126400 THEN
    -- The batch alone is more than the shard makes within the drift and the wait: overload.
    RAISE EXCEPTION USING ERRCODE = 'SF006',
      MESSAGE = format('shardflake: shard 6: next_ids(%s) refused: the shard makes 1024 IDs per ms and may run 1000 ms ahead of the clock (and wait 100 ms), at most 1126400 IDs in one call. Ask for fewer IDs per call, spread the rows over more shards, or install with a larger maxDriftMs. The clock is fine; no ID was issued.', n),
      DETAIL = json_build_object('count', n, 'maxIds', 1126400, 'maxDriftMs', 1000, 'maxWaitMs', 100)::text;
  ELSIF refused THEN
    RAISE EXCEPTION USING ERRCODE = 'SF001',
      MESSAGE = format('shardflake: shard 6: next_ids(%s) refused: its last ID would be %s ms ahead of the clock (%s ms allowed, at most 100 ms of wait): earlier calls drew faster than 1024 IDs per ms, or the clock stepped back. Ask for fewer IDs per call. No ID was issued.', n, (((first + n - 1) >> 10) - (nv >> 10)) * 1, 1000),
      DETAIL = json_build_object('aheadMs', (((first + n - 1) >> 10) - (nv >> 10)) * 1, 'maxDriftMs', 1000, 'waitedMs', 0, 'maxWaitMs', 100)::text;
  END IF;
  IF first + n - 1 > nv + 1024000 THEN
    PERFORM "shard_6"._throttle(first + n - 1);
  END IF;
  RETURN first;
END
$$;

-- Moves the sequence to at least v, never backwards, and returns where it is: the last step of
-- moving the shard here from another database whose sequence was fenced at v, so that every value
-- issued here from now on is above every value the old home ever issued. A move like _reserve
-- (lock, id_gen "not called", the real last value, setval, a new generation): draws running here
-- meanwhile are drawn again.
CREATE OR REPLACE FUNCTION "shard_6"._advance_to(v bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  last bigint;
BEGIN
  IF v IS NULL OR v < 0 OR v > 1125899906842623 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('shardflake: shard 6: _advance_to(v) needs v from 0 to 1125899906842623, got %s', v);
  END IF;
  LOOP
    g := pg_sequence_last_value('"shard_6".id_gen'::regclass);
    IF g IS NULL THEN
      PERFORM "shard_6"._wait_gen();
    ELSIF pg_try_advisory_xact_lock(-573691797, ((g) % 32768 * 65536 + 6)::integer) THEN
      PERFORM set_config('shardflake.moves', (coalesce(nullif(current_setting('shardflake.moves', true), ''), '0')::integer + 1)::text, true);
      EXIT WHEN pg_sequence_last_value('"shard_6".id_gen'::regclass) IS NOT DISTINCT FROM g;
    ELSE
      PERFORM pg_sleep(0.001);
    END IF;
  END LOOP;
  -- From here to the new generation every draw is discarded by its seqlock check.
  PERFORM setval('"shard_6".id_gen'::regclass, g, false);
  SELECT greatest(last_value, v) INTO last FROM "shard_6".id_seq;
  PERFORM setval('"shard_6".id_seq'::regclass, last, true);
  PERFORM setval('"shard_6".id_gen'::regclass, g + 1, true);
  RETURN last;
END
$$;

-- n new IDs of shard 6, ascending, in one call: from 128 on a reserved range,
-- below that n draws (also beyond 256 moves in one transaction).
CREATE OR REPLACE FUNCTION "shard_6".next_ids(n integer) RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g1 bigint;
  g2 bigint;
  vs bigint[];
  nv bigint;
  first bigint;
  tries integer := 0;
BEGIN
  IF n IS NULL OR n < 1 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('shardflake: next_ids(n) needs n >= 1, got %s', n);
  END IF;
  IF n >= 128 AND coalesce(nullif(current_setting('shardflake.moves', true), ''), '0')::integer < 256 THEN
    first := "shard_6"._reserve(n);
    RETURN QUERY SELECT "shard_6"._compose(v) FROM generate_series(first, first + n - 1) AS v;
    RETURN;
  END IF;
  LOOP
    tries := tries + 1;
    IF tries > 1000 THEN
      RAISE EXCEPTION USING ERRCODE = 'SF004', MESSAGE = 'shardflake: shard 6: could not draw IDs in 1000 attempts';
    END IF;
    g1 := pg_sequence_last_value('"shard_6".id_gen'::regclass);
    IF g1 IS NULL THEN
      PERFORM "shard_6"._wait_gen();
      CONTINUE;
    END IF;
    nv := (("shardflake".now_ms() - 1314220021721) << 10);
    IF coalesce(pg_sequence_last_value('"shard_6".id_seq'::regclass), -1) < nv - 51200 AND "shard_6"._catch_up() THEN
      CONTINUE;
    END IF;
    vs := ARRAY(SELECT nextval('"shard_6".id_seq'::regclass) FROM generate_series(1, n));
    g2 := pg_sequence_last_value('"shard_6".id_gen'::regclass);
    IF g2 IS DISTINCT FROM g1 THEN
      CONTINUE;
    END IF;
    nv := (("shardflake".now_ms() - 1314220021721) << 10);
    IF vs[1] < nv - 51200 AND "shard_6"._catch_up() THEN
      CONTINUE;
    END IF;
    IF vs[n] > nv + 1024000 THEN
      PERFORM "shard_6"._throttle(vs[n]);
    END IF;
    RETURN QUERY SELECT "shard_6"._compose(v) FROM unnest(vs) AS v;
    RETURN;
  END LOOP;
END
$$;

-- The slow path of next_id(): the draw overlapped a move of the sequence, or the sequence is
-- behind or ahead of the clock.
CREATE OR REPLACE FUNCTION "shard_6"._settle(g1 bigint, v bigint, g2 bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  nv bigint;
BEGIN
  IF g1 = g2 THEN
    nv := (("shardflake".now_ms() - 1314220021721) << 10);
    IF v < nv - 51200 THEN
      IF "shard_6"._catch_up() THEN
        RETURN (SELECT x FROM "shard_6".next_ids(1) AS x);
      END IF;
    ELSIF v > nv + 1024000 THEN
      PERFORM "shard_6"._throttle(v);
    END IF;
    RETURN "shard_6"._compose(v);
  END IF;
  RETURN (SELECT x FROM "shard_6".next_ids(1) AS x);
END
$$;

-- The fast path of next_id(): one expression (the draw was not overlapped by a move, and the
-- value is within the margin behind and the drift ahead of the clock), else the slow path.
CREATE OR REPLACE FUNCTION "shard_6"._accept(g1 bigint, v bigint, g2 bigint, now_ms bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RETURN CASE
    WHEN g1 = g2 AND v - ((now_ms - 1314220021721) << 10) BETWEEN -51200 AND 1024000 THEN ((v >> 10) << 23) | (6144)::bigint | ((v & 1023) << 0)
    ELSE "shard_6"._settle(g1, v, g2)
  END;
END
$$;

-- One new ID of shard 6; use it as the column DEFAULT. Inlined into the caller's plan:
-- the arguments are evaluated in order (generation, nextval, generation, clock).
CREATE OR REPLACE FUNCTION "shard_6".next_id() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
  SELECT "shard_6"._accept(pg_sequence_last_value('"shard_6".id_gen'::regclass), nextval('"shard_6".id_seq'::regclass), pg_sequence_last_value('"shard_6".id_gen'::regclass), "shardflake".now_ms())
$$;

INSERT INTO "shardflake".shards (shard, schema_name, worker, sequence_cache, version)
VALUES (6, 'shard_6', 0, 1, '8')
ON CONFLICT (shard) DO UPDATE
  SET worker = EXCLUDED.worker, sequence_cache = EXCLUDED.sequence_cache, version = EXCLUDED.version, updated_at = now();
