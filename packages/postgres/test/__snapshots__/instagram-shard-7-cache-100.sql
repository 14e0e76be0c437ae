-- shardflake 8: logical shard 7 of layout "instagram"
DO $shardflake$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = 'shard_7') THEN
    CREATE SCHEMA "shard_7";
  END IF;
END
$shardflake$;

-- Version 5 and earlier moved the sequence under a session-level lock let go by an error handler
-- (which Citus cannot run inside a distributed statement). Waits for such a move running now.
SELECT pg_advisory_xact_lock(-573691797, 7);

DROP FUNCTION IF EXISTS "shard_7"._unlock();

DO $shardflake$
BEGIN
  IF EXISTS (SELECT 1 FROM "shardflake".shards WHERE shard = 7 AND schema_name <> 'shard_7') THEN
    RAISE EXCEPTION USING ERRCODE = 'SF003',
      MESSAGE = format('shardflake: logical shard 7 is already installed in schema %s, not shard_7: one shard must have one source', (SELECT schema_name FROM "shardflake".shards WHERE shard = 7));
  END IF;
END
$shardflake$;

-- Counts in ID space: value = time << 10 | sequence. MAXVALUE is the end of the layout's time.
-- A new shard starts at the clock, so that its first IDs carry the time they are made.
DO $shardflake$
BEGIN
  IF to_regclass('"shard_7".id_seq') IS NULL THEN
    EXECUTE format('CREATE SEQUENCE "shard_7".id_seq AS bigint MINVALUE 0 MAXVALUE 1125899906842623 START %s CACHE 100 NO CYCLE',
      greatest(0, least((("shardflake".now_ms() - 1314220021721) << 10) - 1, 1125899906842623)));
  END IF;
END
$shardflake$;

-- A shard moved away from this database keeps its fence (MAXVALUE at the last value it may have
-- issued): refused here, before the ALTER that would lift it, and again after it (the ALTER waits
-- for a fence being set meanwhile, and each statement here sees what committed before it).
DO $shardflake$
BEGIN
  IF EXISTS (SELECT 1 FROM "shardflake".shards WHERE shard = 7 AND retired_at IS NOT NULL) THEN
    RAISE EXCEPTION USING ERRCODE = 'SF005',
      MESSAGE = format('shardflake: logical shard 7 moved from this database to another one%s%s; installing it here again would issue IDs the new home issues too. To bring it back, move it back (movePostgresShards).', (SELECT coalesce(' (' || moved_to || ')', '') FROM "shardflake".shards WHERE shard = 7), (SELECT ' on ' || retired_at FROM "shardflake".shards WHERE shard = 7));
  END IF;
  ALTER SEQUENCE "shard_7".id_seq MAXVALUE 1125899906842623 CACHE 100;
  IF EXISTS (SELECT 1 FROM "shardflake".shards WHERE shard = 7 AND retired_at IS NOT NULL) THEN
    RAISE EXCEPTION USING ERRCODE = 'SF005',
      MESSAGE = format('shardflake: logical shard 7 moved from this database to another one%s%s; installing it here again would issue IDs the new home issues too. To bring it back, move it back (movePostgresShards).', (SELECT coalesce(' (' || moved_to || ')', '') FROM "shardflake".shards WHERE shard = 7), (SELECT ' on ' || retired_at FROM "shardflake".shards WHERE shard = 7));
  END IF;
END
$shardflake$;

-- Seqlock generation: NULL (not called) while the sequence is being moved forward.
CREATE SEQUENCE IF NOT EXISTS "shard_7".id_gen AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;

CREATE OR REPLACE FUNCTION "shard_7"._compose(v bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT ((v >> 10) << 23) | (7168)::bigint | ((v & 1023) << 0)
$$;

-- With sequence CACHE above 1, called by every draw with the generation g it read, before its
-- nextval: the values this session cached are trusted only while the generation is the one it saw
-- when it last emptied its cache. A draw cut short between its nextval and its check (a cancel, a
-- statement_timeout) never throws away a block it took while the sequence was being moved; any
-- such block was taken under another generation, so this drops it (DISCARD SEQUENCES) before it
-- is used. Returns g.
CREATE OR REPLACE FUNCTION "shard_7"._enter(g bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF g IS NOT NULL AND current_setting('shardflake.cache_shard_7', true) IS DISTINCT FROM g::text THEN
    DISCARD SEQUENCES;
    PERFORM set_config('shardflake.cache_shard_7', g::text, false);
  END IF;
  RETURN g;
END
$$;

-- Raises SF007: the layout's time field is used up (the sequence cannot follow the clock).
CREATE OR REPLACE FUNCTION "shard_7"._exhausted() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'SF007',
    MESSAGE = 'shardflake: shard 7: the time field of the layout ran out on 2046-06-27T17:00:49.497Z: no more IDs can be made. Define a layout with a later epoch. No ID was issued.';
END
$$;

-- Called by a draw that found the sequence more than the margin behind the clock: moves it
-- forward to the clock, or waits (at most maxWaitMs) while another session moves it. True: draw
-- again, the sequence is where it should be (or is being moved). False when the move lock of the
-- generation stayed taken that long (or did so earlier in this transaction), or this transaction
-- already made 256 moves: the caller keeps what it drew (unique, but older).
CREATE OR REPLACE FUNCTION "shard_7"._catch_up() RETURNS boolean
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
    g := pg_sequence_last_value('"shard_7".id_gen'::regclass);
    IF g IS NULL THEN
      -- A move in progress (or one to repair): the draw starts again and waits for it.
      RETURN true;
    END IF;
    IF coalesce(pg_sequence_last_value('"shard_7".id_seq'::regclass), -1) >= (("shardflake".now_ms() - 1314220021721) << 10) - 51200 THEN
      -- Another session moved it already: draw again, without a move of our own.
      RETURN true;
    END IF;
    EXIT WHEN pg_try_advisory_xact_lock(-573691797, ((g) % 32768 * 65536 + 7)::integer);
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
  IF pg_sequence_last_value('"shard_7".id_gen'::regclass) IS DISTINCT FROM g THEN
    -- Another session moved the sequence since: draw again.
    RETURN true;
  END IF;
  -- From here to the new generation every draw is discarded by its seqlock check.
  PERFORM setval('"shard_7".id_gen'::regclass, g, false);
  -- (A sequence never drawn from counts as -1, as the draws' own check sees it.)
  SELECT CASE WHEN is_called THEN last_value ELSE -1 END INTO last FROM "shard_7".id_seq;
  target := (("shardflake".now_ms() - 1314220021721) << 10) - 1;
  IF target > 1125899906842623 THEN
    PERFORM "shard_7"._exhausted();
  END IF;
  IF last < target - 51200 + 1 THEN
    PERFORM setval('"shard_7".id_seq'::regclass, target, true);
  END IF;
  -- A new generation (also when nothing moved): the move is over.
  PERFORM setval('"shard_7".id_gen'::regclass, g + 1, true);
  RETURN true;
END
$$;

-- Waits while another session moves the sequence (id_gen "not called"), polling (1-2 ms), until the move
-- ends. Repairs id_gen left "not called" by a move whose transaction ended half-way (an error, a
-- cancel, a session that died): the move lock of that generation is free again, and it goes on to
-- the next generation under it. Only that generation: between the read and the lock, another
-- session may have repaired it and begun a move of the next one, whose lock it holds; ending that
-- live move here would let a third session move the sequence from the same last value.
CREATE OR REPLACE FUNCTION "shard_7"._wait_gen() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  now_g bigint;
  called boolean;
  pause double precision := 0.001;
BEGIN
  LOOP
    SELECT last_value, is_called INTO g, called FROM "shard_7".id_gen;
    IF called THEN
      RETURN;
    END IF;
    IF pg_try_advisory_xact_lock(-573691797, ((g) % 32768 * 65536 + 7)::integer) THEN
      PERFORM set_config('shardflake.moves', (coalesce(nullif(current_setting('shardflake.moves', true), ''), '0')::integer + 1)::text, true);
      SELECT last_value, is_called INTO now_g, called FROM "shard_7".id_gen;
      IF called THEN
        RETURN;
      END IF;
      IF now_g = g THEN
        PERFORM setval('"shard_7".id_gen'::regclass, g + 1, true);
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
CREATE OR REPLACE FUNCTION "shard_7"._throttle(v bigint) RETURNS void
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
        MESSAGE = format('shardflake: shard 7: the sequence is %s ms ahead of the clock (%s ms allowed, waited %s ms of at most 100): the clock stepped back, or IDs were drawn faster than 1024 per ms for longer than the drift allows. No ID was issued.', ahead + 1000, 1000, waited),
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
CREATE OR REPLACE FUNCTION "shard_7"._reserve(n integer) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  last bigint;
  nv bigint;
  first bigint;
  refused boolean := false;
BEGIN
  LOOP
    g := pg_sequence_last_value('"shard_7".id_gen'::regclass);
    IF g IS NULL THEN
      PERFORM "shard_7"._wait_gen();
    ELSIF pg_try_advisory_xact_lock(-573691797, ((g) % 32768 * 65536 + 7)::integer) THEN
      PERFORM set_config('shardflake.moves', (coalesce(nullif(current_setting('shardflake.moves', true), ''), '0')::integer + 1)::text, true);
      EXIT WHEN pg_sequence_last_value('"shard_7".id_gen'::regclass) IS NOT DISTINCT FROM g;
    ELSE
      PERFORM pg_sleep(0.001);
    END IF;
  END LOOP;
  -- From here to the new generation every draw is discarded by its seqlock check.
  PERFORM setval('"shard_7".id_gen'::regclass, g, false);
  SELECT last_value INTO last FROM "shard_7".id_seq;
  nv := (("shardflake".now_ms() - 1314220021721) << 10);
  first := CASE WHEN last < nv - 51200 THEN nv ELSE last + 1 END;
  -- A range ending further ahead than the wait for the clock may cover is refused unmoved.
  refused := first + n - 1 > nv + 1126400;
  IF NOT refused AND first + n - 1 > 1125899906842623 THEN
    PERFORM "shard_7"._exhausted();
  END IF;
  IF NOT refused THEN
    PERFORM setval('"shard_7".id_seq'::regclass, first + n - 1, true);
  END IF;
  PERFORM setval('"shard_7".id_gen'::regclass, g + 1, true);
  IF refused AND n > 1126400 THEN
    -- The batch alone is more than the shard makes within the drift and the wait: overload.
    RAISE EXCEPTION USING ERRCODE = 'SF006',
      MESSAGE = format('shardflake: shard 7: next_ids(%s) refused: the shard makes 1024 IDs per ms and may run 1000 ms ahead of the clock (and wait 100 ms), at most 1126400 IDs in one call. Ask for fewer IDs per call, spread the rows over more shards, or install with a larger maxDriftMs. The clock is fine; no ID was issued.', n),
      DETAIL = json_build_object('count', n, 'maxIds', 1126400, 'maxDriftMs', 1000, 'maxWaitMs', 100)::text;
  ELSIF refused THEN
    RAISE EXCEPTION USING ERRCODE = 'SF001',
      MESSAGE = format('shardflake: shard 7: next_ids(%s) refused: its last ID would be %s ms ahead of the clock (%s ms allowed, at most 100 ms of wait): earlier calls drew faster than 1024 IDs per ms, or the clock stepped back. Ask for fewer IDs per call. No ID was issued.', n, (((first + n - 1) >> 10) - (nv >> 10)) * 1, 1000),
      DETAIL = json_build_object('aheadMs', (((first + n - 1) >> 10) - (nv >> 10)) * 1, 'maxDriftMs', 1000, 'waitedMs', 0, 'maxWaitMs', 100)::text;
  END IF;
  IF first + n - 1 > nv + 1024000 THEN
    PERFORM "shard_7"._throttle(first + n - 1);
  END IF;
  RETURN first;
END
$$;

-- Moves the sequence to at least v, never backwards, and returns where it is: the last step of
-- moving the shard here from another database whose sequence was fenced at v, so that every value
-- issued here from now on is above every value the old home ever issued. A move like _reserve
-- (lock, id_gen "not called", the real last value, setval, a new generation): draws running here
-- meanwhile are drawn again.
CREATE OR REPLACE FUNCTION "shard_7"._advance_to(v bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  last bigint;
BEGIN
  IF v IS NULL OR v < 0 OR v > 1125899906842623 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('shardflake: shard 7: _advance_to(v) needs v from 0 to 1125899906842623, got %s', v);
  END IF;
  LOOP
    g := pg_sequence_last_value('"shard_7".id_gen'::regclass);
    IF g IS NULL THEN
      PERFORM "shard_7"._wait_gen();
    ELSIF pg_try_advisory_xact_lock(-573691797, ((g) % 32768 * 65536 + 7)::integer) THEN
      PERFORM set_config('shardflake.moves', (coalesce(nullif(current_setting('shardflake.moves', true), ''), '0')::integer + 1)::text, true);
      EXIT WHEN pg_sequence_last_value('"shard_7".id_gen'::regclass) IS NOT DISTINCT FROM g;
    ELSE
      PERFORM pg_sleep(0.001);
    END IF;
  END LOOP;
  -- From here to the new generation every draw is discarded by its seqlock check.
  PERFORM setval('"shard_7".id_gen'::regclass, g, false);
  SELECT greatest(last_value, v) INTO last FROM "shard_7".id_seq;
  PERFORM setval('"shard_7".id_seq'::regclass, last, true);
  PERFORM setval('"shard_7".id_gen'::regclass, g + 1, true);
  RETURN last;
END
$$;

-- n new IDs of shard 7, ascending, in one call: from 128 on a reserved range,
-- below that n draws (also beyond 256 moves in one transaction).
CREATE OR REPLACE FUNCTION "shard_7".next_ids(n integer) RETURNS SETOF bigint
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
    first := "shard_7"._reserve(n);
    RETURN QUERY SELECT "shard_7"._compose(v) FROM generate_series(first, first + n - 1) AS v;
    RETURN;
  END IF;
  LOOP
    tries := tries + 1;
    IF tries > 1000 THEN
      RAISE EXCEPTION USING ERRCODE = 'SF004', MESSAGE = 'shardflake: shard 7: could not draw IDs in 1000 attempts';
    END IF;
    g1 := pg_sequence_last_value('"shard_7".id_gen'::regclass);
    IF g1 IS NULL THEN
      PERFORM "shard_7"._wait_gen();
      CONTINUE;
    END IF;
    nv := (("shardflake".now_ms() - 1314220021721) << 10);
    IF coalesce(pg_sequence_last_value('"shard_7".id_seq'::regclass), -1) < nv - 51200 AND "shard_7"._catch_up() THEN
      CONTINUE;
    END IF;
    IF current_setting('shardflake.cache_shard_7', true) IS DISTINCT FROM g1::text THEN
      PERFORM "shard_7"._enter(g1);
    END IF;
    vs := ARRAY(SELECT nextval('"shard_7".id_seq'::regclass) FROM generate_series(1, n));
    g2 := pg_sequence_last_value('"shard_7".id_gen'::regclass);
    IF g2 IS DISTINCT FROM g1 THEN
      DISCARD SEQUENCES;
      CONTINUE;
    END IF;
    nv := (("shardflake".now_ms() - 1314220021721) << 10);
    IF vs[1] < nv - 51200 AND "shard_7"._catch_up() THEN
      CONTINUE;
    END IF;
    IF vs[n] > nv + 1024000 THEN
      PERFORM "shard_7"._throttle(vs[n]);
    END IF;
    RETURN QUERY SELECT "shard_7"._compose(v) FROM unnest(vs) AS v;
    RETURN;
  END LOOP;
END
$$;

-- The slow path of next_id(): the draw overlapped a move of the sequence, or the sequence is
-- behind or ahead of the clock.
CREATE OR REPLACE FUNCTION "shard_7"._settle(g1 bigint, v bigint, g2 bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  nv bigint;
BEGIN
  IF g1 = g2 THEN
    nv := (("shardflake".now_ms() - 1314220021721) << 10);
    IF v < nv - 51200 THEN
      IF "shard_7"._catch_up() THEN
        RETURN (SELECT x FROM "shard_7".next_ids(1) AS x);
      END IF;
    ELSIF v > nv + 1024000 THEN
      PERFORM "shard_7"._throttle(v);
    END IF;
    RETURN "shard_7"._compose(v);
  END IF;
  DISCARD SEQUENCES;
  RETURN (SELECT x FROM "shard_7".next_ids(1) AS x);
END
$$;

-- The fast path of next_id(): one expression (the draw was not overlapped by a move, and the
-- value is within the margin behind and the drift ahead of the clock), else the slow path.
CREATE OR REPLACE FUNCTION "shard_7"._accept(g1 bigint, v bigint, g2 bigint, now_ms bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RETURN CASE
    WHEN g1 = g2 AND v - ((now_ms - 1314220021721) << 10) BETWEEN -51200 AND 1024000 THEN ((v >> 10) << 23) | (7168)::bigint | ((v & 1023) << 0)
    ELSE "shard_7"._settle(g1, v, g2)
  END;
END
$$;

-- One new ID of shard 7; use it as the column DEFAULT. Inlined into the caller's plan:
-- the arguments are evaluated in order (generation, nextval, generation, clock).
CREATE OR REPLACE FUNCTION "shard_7".next_id() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
  SELECT "shard_7"._accept(CASE WHEN current_setting('shardflake.cache_shard_7', true) = pg_sequence_last_value('"shard_7".id_gen'::regclass)::text THEN pg_sequence_last_value('"shard_7".id_gen'::regclass) ELSE "shard_7"._enter(pg_sequence_last_value('"shard_7".id_gen'::regclass)) END, nextval('"shard_7".id_seq'::regclass), pg_sequence_last_value('"shard_7".id_gen'::regclass), "shardflake".now_ms())
$$;

INSERT INTO "shardflake".shards (shard, schema_name, worker, sequence_cache, version)
VALUES (7, 'shard_7', 0, 100, '8')
ON CONFLICT (shard) DO UPDATE
  SET worker = EXCLUDED.worker, sequence_cache = EXCLUDED.sequence_cache, version = EXCLUDED.version, updated_at = now();
