\echo Use "CREATE EXTENSION shardflake_next_id_proto" to load this file. \quit

-- The clock as shardflake.now_ms() reads it: floor(date_part('epoch', clock_timestamp()) * 1000).
CREATE FUNCTION proto_now_ms() RETURNS bigint
AS 'MODULE_PATHNAME', 'proto_now_ms' LANGUAGE C VOLATILE;

-- A shard's _accept(g1, v, g2, now_ms) in C, the layout's numbers as arguments: the ID when
-- g1 = g2 (not NULL) and v is within [-margin, +drift] of the clock, else settle(g1, v, g2).
CREATE FUNCTION proto_accept(g1 bigint, v bigint, g2 bigint, now_ms bigint,
  epoch bigint, unit bigint, sequence_bits integer, margin bigint, drift bigint,
  time_shift integer, constant bigint, sequence_shift integer, settle regprocedure)
RETURNS bigint AS 'MODULE_PATHNAME', 'proto_accept' LANGUAGE C VOLATILE;

-- The least a C next_id() can do and keep the seqlock and the clock check: no arguments
-- (the shard's numbers set once per session by proto_configure), nextval, ONE read of id_gen
-- (compared with the one this session read after its previous draw), the clock, compose.
CREATE FUNCTION proto_configure(seq regclass, gen regclass, epoch bigint, unit bigint,
  sequence_bits integer, margin bigint, drift bigint, time_shift integer, constant bigint,
  sequence_shift integer, settle regprocedure)
RETURNS void AS 'MODULE_PATHNAME', 'proto_configure' LANGUAGE C VOLATILE STRICT;
CREATE FUNCTION proto_next_id() RETURNS bigint
AS 'MODULE_PATHNAME', 'proto_next_id' LANGUAGE C VOLATILE;
