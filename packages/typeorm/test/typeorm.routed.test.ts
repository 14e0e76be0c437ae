import { describeRoutedAdapter } from '@shardflake/conformance'
import { routedOptions } from './routed-blog'

describeRoutedAdapter('TypeORM 1.x / PostgreSQL', routedOptions('postgres'))
describeRoutedAdapter('TypeORM 1.x / MariaDB', routedOptions('mysql'))
