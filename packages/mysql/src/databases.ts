import type { SourceDatabases } from '@shardflake/core'
import type { Pool } from 'mysql2/promise'

/** A server of a `MysqlSource`: a mysql2 pool you own, or a URL the source opens and closes. */
export type MysqlTarget = Pool | string

/** Where a `MysqlSource`'s logical shards live (its `databases` option). */
export type MysqlDatabases = SourceDatabases<MysqlTarget>
