import { describeRoutedAdapter } from '@shardflake/conformance'
import { routedOptions } from '../support/routed-blog'

describeRoutedAdapter('Drizzle 1.0 / PostgreSQL / in-process', routedOptions('postgres'))
describeRoutedAdapter('Drizzle 1.0 / MariaDB / in-process', routedOptions('mysql'))
