import { describeRoutedAdapter } from '@shardflake/conformance'
import { routedOptions } from './support/routed-blog'

describeRoutedAdapter('Kysely / PostgreSQL', routedOptions('postgres'))
describeRoutedAdapter('Kysely / MariaDB', routedOptions('mysql'))
