import { describeAdapter } from '@shardflake/conformance'
import { blogOnTypeorm } from './blog'
import { mysqlSource, postgresSource } from './sources'

describeAdapter('TypeORM 1.x / PostgreSQL / PostgresSource', {
  dialect: 'postgres',
  database: 'sf_typeorm_pg_dbsource',
  createSource: postgresSource,
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source),
})

describeAdapter('TypeORM 1.x / MariaDB / MysqlSource', {
  dialect: 'mysql',
  database: 'sf_typeorm_my_dbsource',
  logicalShards: 8,
  createSource: (raw) => mysqlSource(raw, 'sf_typeorm_s1_'),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source),
})
