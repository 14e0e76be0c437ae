import { describeShardedDatabases } from '../support/sharded-databases'

describeShardedDatabases('045', 'postgres')
describeShardedDatabases('045', 'mysql')
