import { describeRoutedAdapter } from '@shardflake/conformance'
import { routedOptions } from './support/routed-blog'

describeRoutedAdapter('Kysely / PostgreSQL / in-process', routedOptions('postgres'))
describeRoutedAdapter('Kysely / MariaDB / in-process', routedOptions('mysql'))
