import { describeRoutedAdapter } from '@shardflake/conformance'
import { routedOptions } from '../support/routed-blog'

describeRoutedAdapter('Drizzle 0.45 / PostgreSQL / in-process', routedOptions('postgres'))
describeRoutedAdapter('Drizzle 0.45 / MariaDB / in-process', routedOptions('mysql'))
