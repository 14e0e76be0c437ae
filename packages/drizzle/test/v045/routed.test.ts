import { describeRoutedAdapter } from '@shardflake/conformance'
import { routedOptions } from '../support/routed-blog'

describeRoutedAdapter('Drizzle 0.45 / PostgreSQL', routedOptions('postgres'))
describeRoutedAdapter('Drizzle 0.45 / MariaDB', routedOptions('mysql'))
