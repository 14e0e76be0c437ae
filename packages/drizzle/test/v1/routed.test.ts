import { describeRoutedAdapter } from '@shardflake/conformance'
import { routedOptions } from '../support/routed-blog'

describeRoutedAdapter('Drizzle 1.0 / PostgreSQL', routedOptions('postgres'))
describeRoutedAdapter('Drizzle 1.0 / MariaDB', routedOptions('mysql'))
