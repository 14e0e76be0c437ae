-- shardflake 8: fence logical shard 5, moved to another database
CREATE SEQUENCE IF NOT EXISTS "shard_5".id_gen AS bigint MINVALUE 0 START 0 CACHE 1 NO CYCLE;

-- The locks every draw takes, in the order draws take them: ALTER SEQUENCE blocks concurrent
-- nextval and setval until this transaction ends, and waits for transactions that drew from it.
ALTER SEQUENCE "shard_5".id_gen NO CYCLE;

ALTER SEQUENCE "shard_5".id_seq NO CYCLE;

DO $shardflake$
DECLARE
  r record;
  last bigint;
  fence bigint;
  current_max bigint;
  tries integer := 0;
BEGIN
  SELECT schema_name, retired_at, fence_value INTO r FROM "shardflake".shards WHERE shard = 5 FOR UPDATE;
  IF NOT FOUND OR r.schema_name <> 'shard_5' THEN
    RAISE EXCEPTION USING ERRCODE = 'SF003',
      MESSAGE = 'shardflake: logical shard 5 is not installed in schema shard_5 of this database: nothing to fence';
  END IF;
  LOOP
    tries := tries + 1;
    SELECT last_value INTO last FROM "shard_5".id_seq;
    SELECT seqmax INTO current_max FROM pg_catalog.pg_sequence WHERE seqrelid = '"shard_5".id_seq'::regclass;
    -- L: the last value plus the margin, or an earlier fence (never lowered).
    fence := CASE
      WHEN r.retired_at IS NOT NULL THEN greatest(last, r.fence_value, 1)
      WHEN last > 1125899906791423 THEN 1125899906842623
      ELSE greatest(last + 51200, 1)
    END;
    EXIT WHEN current_max = fence;
    BEGIN
      EXECUTE format('ALTER SEQUENCE "shard_5".id_seq MAXVALUE %s', fence);
      EXIT;
    EXCEPTION WHEN invalid_parameter_value THEN
      -- The value passed L between the read and the ALTER (not while this transaction holds the
      -- sequence's lock; never assumed): read it again.
      IF tries >= 100 THEN
        RAISE;
      END IF;
    END;
  END LOOP;
  -- Draws already running see a move that never ends; their next step is a fenced helper.
  PERFORM setval('"shard_5".id_gen'::regclass, (SELECT last_value FROM "shard_5".id_gen), false);
  UPDATE "shardflake".shards SET retired_at = coalesce(retired_at, now()), fence_value = fence, updated_at = now()
  WHERE shard = 5;
END
$shardflake$;

-- Raises SF005: the shard moved; nothing here draws or moves its sequence any more.
CREATE OR REPLACE FUNCTION "shard_5"._moved() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  r record;
BEGIN
  SELECT moved_to, retired_at INTO r FROM "shardflake".shards WHERE shard = 5;
  RAISE EXCEPTION USING ERRCODE = 'SF005',
    MESSAGE = format('shardflake: logical shard 5 moved to another database%s%s; update the shard map. No ID was issued.', coalesce(' (' || r.moved_to || ')', ''), coalesce(' on ' || r.retired_at, ''));
END
$$;

CREATE OR REPLACE FUNCTION "shard_5".next_id() RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM "shard_5"._moved();
  RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION "shard_5".next_ids(n integer) RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM "shard_5"._moved();
  RETURN;
END
$$;

CREATE OR REPLACE FUNCTION "shard_5"._reserve(n integer) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM "shard_5"._moved();
  RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION "shard_5"._catch_up() RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM "shard_5"._moved();
  RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION "shard_5"._advance_to(v bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM "shard_5"._moved();
  RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION "shard_5"._wait_gen() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM "shard_5"._moved();
END
$$;

CREATE OR REPLACE FUNCTION "shard_5"._settle(g1 bigint, v bigint, g2 bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM "shard_5"._moved();
  RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION "shard_5"._accept(g1 bigint, v bigint, g2 bigint, now_ms bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM "shard_5"._moved();
  RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION "shard_5"._compose(v bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM "shard_5"._moved();
  RETURN NULL;
END
$$;
