/*
 * next_id()'s fast path in C, for measuring what bounds next_id() against nextval() (see
 * bench/RESULTS.md). The slow path stays the shard's PL/pgSQL _settle(g1, v, g2).
 */
#include "postgres.h"

#include "commands/sequence.h"
#include "common/int.h"
#include "fmgr.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(proto_now_ms);
PG_FUNCTION_INFO_V1(proto_accept);
PG_FUNCTION_INFO_V1(proto_configure);
PG_FUNCTION_INFO_V1(proto_next_id);

typedef struct Shape
{
	int64		epoch;
	int64		unit;
	int32		bits;
	int64		margin;
	int64		drift;
	int32		time_shift;
	int64		constant;
	int32		sequence_shift;
} Shape;

static int64
clock_ms(void)
{
	int64		us = (int64) GetCurrentTimestamp() +
		((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * USECS_PER_SEC);

	return us >= 0 ? us / 1000 : -((-us + 999) / 1000);
}

/* The ID for v, or false when v is not within [-margin, +drift] of the clock ms. */
static bool
compose(const Shape *s, int64 v, int64 ms, int64 *id)
{
	int64		t;
	int64		ahead;
	uint64		u;

	if (v < 0 || s->unit <= 0 || s->bits < 0 || s->bits > 62 || pg_sub_s64_overflow(ms, s->epoch, &t))
		return false;
	t /= s->unit;
	if (t < 0 || t > (PG_INT64_MAX >> s->bits) || pg_sub_s64_overflow(v, t << s->bits, &ahead) ||
		ahead < -s->margin || ahead > s->drift)
		return false;
	u = (uint64) v;
	*id = (int64) (((u >> s->bits) << s->time_shift) | (uint64) s->constant |
				   ((u & ((UINT64CONST(1) << s->bits) - 1)) << s->sequence_shift));
	return true;
}

/* settle(g1, v, g2), NULLs as they came; its FmgrInfo kept in flinfo->fn_extra. */
static Datum
settle(FunctionCallInfo fcinfo, Oid settle_oid, NullableDatum g1, int64 v, NullableDatum g2)
{
	FmgrInfo   *info = (FmgrInfo *) fcinfo->flinfo->fn_extra;
	LOCAL_FCINFO(call, 3);
	Datum		result;

	if (info == NULL || info->fn_oid != settle_oid)
	{
		info = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(FmgrInfo));
		fmgr_info_cxt(settle_oid, info, fcinfo->flinfo->fn_mcxt);
		fcinfo->flinfo->fn_extra = info;
	}
	InitFunctionCallInfoData(*call, info, 3, InvalidOid, NULL, NULL);
	call->args[0] = g1;
	call->args[1].value = Int64GetDatum(v);
	call->args[1].isnull = false;
	call->args[2] = g2;
	result = FunctionCallInvoke(call);
	fcinfo->isnull = call->isnull;
	return result;
}

Datum
proto_now_ms(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(clock_ms());
}

Datum
proto_accept(PG_FUNCTION_ARGS)
{
	Shape		s;
	int64		id;

	for (int i = 4; i <= 12; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
							errmsg("proto_accept: the layout's numbers must not be NULL")));
	if (PG_ARGISNULL(1))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("proto_accept: v must not be NULL")));
	s.epoch = PG_GETARG_INT64(4);
	s.unit = PG_GETARG_INT64(5);
	s.bits = PG_GETARG_INT32(6);
	s.margin = PG_GETARG_INT64(7);
	s.drift = PG_GETARG_INT64(8);
	s.time_shift = PG_GETARG_INT32(9);
	s.constant = PG_GETARG_INT64(10);
	s.sequence_shift = PG_GETARG_INT32(11);
	if (!PG_ARGISNULL(0) && !PG_ARGISNULL(2) && !PG_ARGISNULL(3) &&
		PG_GETARG_INT64(0) == PG_GETARG_INT64(2) &&
		compose(&s, PG_GETARG_INT64(1), PG_GETARG_INT64(3), &id))
		PG_RETURN_INT64(id);
	return settle(fcinfo, PG_GETARG_OID(12), fcinfo->args[0], PG_GETARG_INT64(1), fcinfo->args[2]);
}

static bool configured = false;
static Oid	config_seq;
static Oid	config_gen;
static Oid	config_settle;
static Shape config_shape;
/* The generation this session read after its last draw that was kept (none: InvalidOid). */
static Oid	seen_gen = InvalidOid;
static int64 seen_g;

Datum
proto_configure(PG_FUNCTION_ARGS)
{
	config_seq = PG_GETARG_OID(0);
	config_gen = PG_GETARG_OID(1);
	config_shape.epoch = PG_GETARG_INT64(2);
	config_shape.unit = PG_GETARG_INT64(3);
	config_shape.bits = PG_GETARG_INT32(4);
	config_shape.margin = PG_GETARG_INT64(5);
	config_shape.drift = PG_GETARG_INT64(6);
	config_shape.time_shift = PG_GETARG_INT32(7);
	config_shape.constant = PG_GETARG_INT64(8);
	config_shape.sequence_shift = PG_GETARG_INT32(9);
	config_settle = PG_GETARG_OID(10);
	configured = true;
	seen_gen = InvalidOid;
	PG_RETURN_VOID();
}

/* pg_sequence_last_value(seq) into *value; false for NULL ("not called"). */
static bool
last_value(Oid seq, int64 *value)
{
	LOCAL_FCINFO(call, 1);
	Datum		result;

	InitFunctionCallInfoData(*call, NULL, 1, InvalidOid, NULL, NULL);
	call->args[0].value = ObjectIdGetDatum(seq);
	call->args[0].isnull = false;
	result = pg_sequence_last_value(call);
	if (call->isnull)
		return false;
	*value = DatumGetInt64(result);
	return true;
}

Datum
proto_next_id(PG_FUNCTION_ARGS)
{
	NullableDatum g1 = {0, true};
	NullableDatum g2 = {0, true};
	int64		g;
	int64		v;
	int64		id;

	if (!configured)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("proto_next_id: call proto_configure first")));
	if (seen_gen == config_gen)
		g1 = (NullableDatum) {Int64GetDatum(seen_g), false};
	else if (last_value(config_gen, &g))
		g1 = (NullableDatum) {Int64GetDatum(g), false};
	v = nextval_internal(config_seq, true);
	if (last_value(config_gen, &g))
		g2 = (NullableDatum) {Int64GetDatum(g), false};
	if (!g1.isnull && !g2.isnull && DatumGetInt64(g1.value) == DatumGetInt64(g2.value) &&
		compose(&config_shape, v, clock_ms(), &id))
	{
		seen_gen = config_gen;
		seen_g = DatumGetInt64(g2.value);
		PG_RETURN_INT64(id);
	}
	seen_gen = InvalidOid;
	return settle(fcinfo, config_settle, g1, v, g2);
}
