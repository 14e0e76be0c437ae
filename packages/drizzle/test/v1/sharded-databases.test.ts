import { describeShardedDatabases } from '../support/sharded-databases'

describeShardedDatabases('1', 'postgres')
describeShardedDatabases('1', 'mysql')
