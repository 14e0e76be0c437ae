import { describeRoutedAdapter } from '@shardflake/conformance'
import { routedOptions } from './routed-blog'

describeRoutedAdapter('TypeORM 1.x / PostgreSQL / in-process', routedOptions('postgres'))
describeRoutedAdapter('TypeORM 1.x / MariaDB / in-process', routedOptions('mysql'))
