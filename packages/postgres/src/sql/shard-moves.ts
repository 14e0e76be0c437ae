import type { ShardContext } from './options'

/**
 * The routines of one shard that move its sequence (every `setval`), each under the move lock of
 * the current generation (a transaction-level advisory lock) and the seqlock in `id_gen`: the catch-up to the clock, the wait for a move in
 * progress, the wait for the clock, a reservation for `next_ids(n)`, and the advance past a fence
 * when the shard arrives from another database. Why that never repeats an ID: `docs/next-id.md`.
 * @internal
 */
export function sequenceMoveRoutines(x: ShardContext): string {
  const { o, layout, n, shard, s, c, seq, gen, nowV, lockOf } = x
  return `-- Raises SF007: the layout's time field is used up (the sequence cannot follow the clock).
CREATE OR REPLACE FUNCTION ${s}._exhausted() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'SF007',
    MESSAGE = 'shardflake: shard ${shard}: the time field of the layout ran out on ${new Date(layout.epoch + layout.timeLimit * layout.timeUnitMs).toISOString()}: no more IDs can be made. Define a layout with a later epoch. No ID was issued.';
END
$$;

-- Called by a draw that found the sequence more than the margin behind the clock: moves it
-- forward to the clock, or waits (at most maxWaitMs) while another session moves it. True: draw
-- again, the sequence is where it should be (or is being moved). False when the move lock of the
-- generation stayed taken that long (or did so earlier in this transaction), or this transaction
-- already made ${MOVE_BUDGET} moves: the caller keeps what it drew (unique, but older).
CREATE OR REPLACE FUNCTION ${s}._catch_up() RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  last bigint;
  target bigint;
  waited integer := 0;
BEGIN
  IF ${movesSoFar} >= ${MOVE_BUDGET} THEN
    RETURN false;
  END IF;
  LOOP
    g := pg_sequence_last_value(${gen});
    IF g IS NULL THEN
      -- A move in progress (or one to repair): the draw starts again and waits for it.
      RETURN true;
    END IF;
    IF coalesce(pg_sequence_last_value(${seq}), -1) >= ${nowV} - ${n.margin} THEN
      -- Another session moved it already: draw again, without a move of our own.
      RETURN true;
    END IF;
    EXIT WHEN pg_try_advisory_xact_lock(${lockOf('g')});
    -- At most once per transaction: a mover blocked behind a fence (movePostgresShards) would
    -- otherwise cost every row of a multi-row INSERT the whole wait.
    IF waited >= ${o.maxWaitMs} OR current_setting('shardflake.gave_up_waiting', true) = 'yes' THEN
      PERFORM set_config('shardflake.gave_up_waiting', 'yes', true);
      RETURN false;
    END IF;
    PERFORM pg_sleep(0.001);
    waited := waited + 1;
  END LOOP;
  PERFORM set_config('shardflake.moves', (${movesSoFar} + 1)::text, true);
  IF pg_sequence_last_value(${gen}) IS DISTINCT FROM g THEN
    -- Another session moved the sequence since: draw again.
    RETURN true;
  END IF;
${markMove(x)}
  -- (A sequence never drawn from counts as -1, as the draws' own check sees it.)
  SELECT CASE WHEN is_called THEN last_value ELSE -1 END INTO last FROM ${s}.id_seq;
  target := ${nowV} - 1;
  IF target > ${n.maxValue} THEN
    PERFORM ${s}._exhausted();
  END IF;
  IF last < target - ${n.margin} + 1 THEN
    PERFORM setval(${seq}, target, true);
  END IF;
  -- A new generation (also when nothing moved): the move is over.
  PERFORM setval(${gen}, g + 1, true);
  RETURN true;
END
$$;

-- Waits while another session moves the sequence (id_gen "not called"), polling (1-2 ms), until the move
-- ends. Repairs id_gen left "not called" by a move whose transaction ended half-way (an error, a
-- cancel, a session that died): the move lock of that generation is free again, and it goes on to
-- the next generation under it. Only that generation: between the read and the lock, another
-- session may have repaired it and begun a move of the next one, whose lock it holds; ending that
-- live move here would let a third session move the sequence from the same last value.
CREATE OR REPLACE FUNCTION ${s}._wait_gen() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  g bigint;
  now_g bigint;
  called boolean;
  pause double precision := 0.001;
BEGIN
  LOOP
    SELECT last_value, is_called INTO g, called FROM ${s}.id_gen;
    IF called THEN
      RETURN;
    END IF;
    IF pg_try_advisory_xact_lock(${lockOf('g')}) THEN
      PERFORM set_config('shardflake.moves', (${movesSoFar} + 1)::text, true);
      SELECT last_value, is_called INTO now_g, called FROM ${s}.id_gen;
      IF called THEN
        RETURN;
      END IF;
      IF now_g = g THEN
        PERFORM setval(${gen}, g + 1, true);
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
-- Waits (polling) while another session moves the sequence: no draw succeeds meanwhile anyway.
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
  `  SELECT last_value INTO last FROM ${s}.id_seq;
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
  `  SELECT greatest(last_value, v) INTO last FROM ${s}.id_seq;
  PERFORM setval(${seq}, last, true);`,
)}
  RETURN last;
END
$$;

`
}

/**
 * How many moves of a sequence one transaction may make (each keeps a transaction-level lock until
 * the transaction ends); beyond it, catch-ups and reservations are skipped (draws keep their
 * values, reservations become per-value draws). A transaction drawing without pause for about
 * this many times `marginMs` gets IDs that fall behind the clock after that. @internal
 */
export const MOVE_BUDGET = 256

/** The moves this transaction made so far (an SQL expression). @internal */
export const movesSoFar = `coalesce(nullif(current_setting('shardflake.moves', true), ''), '0')::integer`

/** The first step of a move at generation `g`, its lock held: readers see NULL from here on. */
function markMove(x: ShardContext): string {
  return `  -- From here to the new generation every draw is discarded by its seqlock check.
  PERFORM setval(${x.gen}, g, false);`
}

/**
 * A move of the sequence at generation `g` (lock, id_gen "not called", `body`, a new generation):
 * draws running meanwhile are discarded and drawn again. Takes the move lock of the current
 * generation (a transaction-level advisory lock, polling), checks that the generation did not
 * change meanwhile, and moves. No error handler: when the transaction ends half-way, the lock goes
 * with it and the next draw repairs id_gen (`_wait_gen`).
 */
function seqlockMove(x: ShardContext, body: string): string {
  return `  LOOP
    g := pg_sequence_last_value(${x.gen});
    IF g IS NULL THEN
      PERFORM ${x.s}._wait_gen();
    ELSIF pg_try_advisory_xact_lock(${x.lockOf('g')}) THEN
      PERFORM set_config('shardflake.moves', (${movesSoFar} + 1)::text, true);
      EXIT WHEN pg_sequence_last_value(${x.gen}) IS NOT DISTINCT FROM g;
    ELSE
      PERFORM pg_sleep(0.001);
    END IF;
  END LOOP;
${markMove(x)}
${body}
  PERFORM setval(${x.gen}, g + 1, true);`
}
