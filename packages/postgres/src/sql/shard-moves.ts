import type { ShardContext } from './options'

/**
 * The routines of one shard that move its sequence (every `setval`), each under the shard's
 * advisory lock and the seqlock in `id_gen`: the catch-up to the clock, the wait for a move in
 * progress, the wait for the clock, a reservation for `next_ids(n)`, and the advance past a fence
 * when the shard arrives from another database. Why that never repeats an ID: `docs/next-id.md`.
 * @internal
 */
export function sequenceMoveRoutines(x: ShardContext): string {
  const { o, layout, n, shard, s, c, seq, gen, nowV, lock, lockClass } = x
  return `-- Raises SF007: the layout's time field is used up (the sequence cannot follow the clock).
CREATE OR REPLACE FUNCTION ${s}._exhausted() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'SF007',
    MESSAGE = 'shardflake: shard ${shard}: the time field of the layout ran out on ${new Date(layout.epoch + layout.timeLimit * layout.timeUnitMs).toISOString()}: no more IDs can be made. Define a layout with a later epoch. No ID was issued.';
END
$$;

-- Lets go of the shard's advisory lock if this session holds it. Only on error paths: a cancel
-- (statement_timeout) can land between taking the lock and the next statement, and a session
-- lock left behind would stop every move of this shard's sequence while the session lives.
CREATE OR REPLACE FUNCTION ${s}._unlock() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF EXISTS (
    SELECT 1 FROM pg_catalog.pg_locks
    WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid() AND granted
      AND classid = ${lockClass} AND objid = ${shard} AND objsubid = 2
  ) THEN
    PERFORM pg_advisory_unlock(${lock});
  END IF;
END
$$;

-- Called by a draw that found the sequence more than the margin behind the clock: moves it
-- forward to the clock, or waits (at most maxWaitMs) for the session that holds the lock and is
-- moving it already. True: draw again, the sequence is where it should be. False only when that
-- session held the lock all along (or did so earlier in this transaction): the caller keeps what
-- it drew (unique, but older).
CREATE OR REPLACE FUNCTION ${s}._catch_up() RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  called boolean;
  last bigint;
  target bigint;
  moved boolean := false;
  waited integer := 0;
BEGIN
${locked(
  x,
  `    WHILE NOT pg_try_advisory_lock(${lock}) LOOP
      -- At most once per transaction: a holder blocked behind a fence (movePostgresShards) would
      -- otherwise cost every row of a multi-row INSERT the whole wait.
      IF waited >= ${o.maxWaitMs} OR current_setting('shardflake.gave_up_waiting', true) = 'yes' THEN
        PERFORM set_config('shardflake.gave_up_waiting', 'yes', true);
        RETURN false;
      END IF;
      PERFORM pg_sleep(0.001);
      waited := waited + 1;
    END LOOP;
    SELECT last_value, is_called INTO g, called FROM ${s}.id_gen;
    IF called THEN
      PERFORM setval(${gen}, g, false);
    END IF;
    -- From here to the last setval(id_gen) every draw is discarded by its seqlock check.
    -- (A sequence never drawn from counts as -1, as the draws' own check sees it.)
    SELECT CASE WHEN is_called THEN last_value ELSE -1 END INTO last FROM ${s}.id_seq;
    target := ${nowV} - 1;
    IF target > ${n.maxValue} THEN
      PERFORM ${s}._exhausted();
    END IF;
    IF last < target - ${n.margin} + 1 THEN
      PERFORM setval(${seq}, target, true);
      moved := true;
    END IF;
    -- A new generation when the sequence moved (or a session died half-way); else the same one.
    PERFORM setval(${gen}, CASE WHEN moved OR NOT called THEN g + 1 ELSE g END, true);`,
)}
  -- Moved here, or by another session since the caller drew: either way, draw again.
  RETURN true;
END
$$;

-- Waits while another session moves the sequence: blocked on the lock that session holds, woken
-- when it lets go. Repairs id_gen left NULL by a session that died while moving the sequence.
CREATE OR REPLACE FUNCTION ${s}._wait_gen() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  called boolean;
BEGIN
${locked(
  x,
  `    PERFORM pg_advisory_lock(${lock});
    SELECT last_value, is_called INTO g, called FROM ${s}.id_gen;
    IF NOT called THEN
      PERFORM setval(${gen}, g + 1, true);
    END IF;`,
)}
END
$$;

-- Waits until the value's time is at most maxDriftMs ahead of the clock, or fails (SF001).
CREATE OR REPLACE FUNCTION ${s}._throttle(v bigint) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  ahead bigint;
  waited bigint := 0;
BEGIN
  LOOP
    ahead := ((v >> ${n.S}) * ${n.unit} + ${n.epoch}) - ${c}.now_ms() - ${o.maxDriftMs};
    EXIT WHEN ahead <= 0;
    IF waited + ahead > ${o.maxWaitMs} THEN
      RAISE EXCEPTION USING ERRCODE = 'SF001',
        MESSAGE = format('shardflake: shard ${shard}: the sequence is %s ms ahead of the clock (%s ms allowed, waited %s ms of at most ${o.maxWaitMs}): the clock stepped back, or IDs were drawn faster than ${layout.capacityPerMs} per ms for longer than the drift allows. No ID was issued.', ahead + ${o.maxDriftMs}, ${o.maxDriftMs}, waited),
        DETAIL = json_build_object('aheadMs', ahead + ${o.maxDriftMs}, 'maxDriftMs', ${o.maxDriftMs}, 'waitedMs', waited, 'maxWaitMs', ${o.maxWaitMs})::text,
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
-- Waits for the lock: while another session holds it, id_gen reads NULL and no draw succeeds.
CREATE OR REPLACE FUNCTION ${s}._reserve(n integer) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  last bigint;
  nv bigint;
  first bigint;
  refused boolean := false;
BEGIN
${seqlockMove(
  x,
  `    SELECT last_value INTO last FROM ${s}.id_seq;
    nv := ${nowV};
    first := CASE WHEN last < nv - ${n.margin} THEN nv ELSE last + 1 END;
    -- A range ending further ahead than the wait for the clock may cover is refused unmoved.
    refused := first + n - 1 > nv + ${n.drift + n.wait};
    IF NOT refused AND first + n - 1 > ${n.maxValue} THEN
      PERFORM ${s}._exhausted();
    END IF;
    IF NOT refused THEN
      PERFORM setval(${seq}, first + n - 1, true);
    END IF;`,
)}
  IF refused AND n > ${n.drift + n.wait} THEN
    -- The batch alone is more than the shard makes within the drift and the wait: overload.
    RAISE EXCEPTION USING ERRCODE = 'SF006',
      MESSAGE = format('shardflake: shard ${shard}: next_ids(%s) refused: the shard makes ${layout.capacityPerMs} IDs per ms and may run ${o.maxDriftMs} ms ahead of the clock (and wait ${o.maxWaitMs} ms), at most ${n.drift + n.wait} IDs in one call. Ask for fewer IDs per call, spread the rows over more shards, or install with a larger maxDriftMs. The clock is fine; no ID was issued.', n),
      DETAIL = json_build_object('count', n, 'maxIds', ${n.drift + n.wait}, 'maxDriftMs', ${o.maxDriftMs}, 'maxWaitMs', ${o.maxWaitMs})::text;
  ELSIF refused THEN
    RAISE EXCEPTION USING ERRCODE = 'SF001',
      MESSAGE = format('shardflake: shard ${shard}: next_ids(%s) refused: its last ID would be %s ms ahead of the clock (%s ms allowed, at most ${o.maxWaitMs} ms of wait): earlier calls drew faster than ${layout.capacityPerMs} IDs per ms, or the clock stepped back. Ask for fewer IDs per call. No ID was issued.', n, (((first + n - 1) >> ${n.S}) - (nv >> ${n.S})) * ${n.unit}, ${o.maxDriftMs}),
      DETAIL = json_build_object('aheadMs', (((first + n - 1) >> ${n.S}) - (nv >> ${n.S})) * ${n.unit}, 'maxDriftMs', ${o.maxDriftMs}, 'waitedMs', 0, 'maxWaitMs', ${o.maxWaitMs})::text;
  END IF;
  IF first + n - 1 > nv + ${n.drift} THEN
    PERFORM ${s}._throttle(first + n - 1);
  END IF;
  RETURN first;
END
$$;

-- Moves the sequence to at least v, never backwards, and returns where it is: the last step of
-- moving the shard here from another database whose sequence was fenced at v, so that every value
-- issued here from now on is above every value the old home ever issued. A move like _reserve
-- (lock, id_gen "not called", the real last value, setval, a new generation): draws running here
-- meanwhile are drawn again.
CREATE OR REPLACE FUNCTION ${s}._advance_to(v bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  last bigint;
BEGIN
  IF v IS NULL OR v < 0 OR v > ${n.maxValue} THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('shardflake: shard ${shard}: _advance_to(v) needs v from 0 to ${n.maxValue}, got %s', v);
  END IF;
${seqlockMove(
  x,
  `    SELECT greatest(last_value, v) INTO last FROM ${s}.id_seq;
    PERFORM setval(${seq}, last, true);`,
)}
  RETURN last;
END
$$;

`
}

/**
 * A block under the shard's advisory lock (`inner` takes it, then works): the lock is let go as
 * the block's last statement, and on any error (a cancel included) by `_unlock()`, the error
 * raised again.
 */
function locked(x: ShardContext, inner: string): string {
  return `  BEGIN
${inner}
    -- The last statement of the protected block: a cancel cannot land between it and the end.
    PERFORM pg_advisory_unlock(${x.lock});
  EXCEPTION WHEN query_canceled OR others THEN
    PERFORM ${x.s}._unlock();
    RAISE;
  END;`
}

/**
 * A move of the sequence under the lock and the seqlock (`id_gen` "not called" while `body`
 * runs, a new generation after it): draws running meanwhile are discarded and drawn again.
 */
function seqlockMove(x: ShardContext, body: string): string {
  return locked(
    x,
    `    PERFORM pg_advisory_lock(${x.lock});
    SELECT last_value INTO g FROM ${x.s}.id_gen;
    PERFORM setval(${x.gen}, g, false);
    -- From here to the last setval(id_gen) every draw is discarded by its seqlock check.
${body}
    PERFORM setval(${x.gen}, g + 1, true);`,
  )
}
