import { describeRoutedAdapter } from '@shardflake/conformance'
import { routedOptions } from './support/routed-blog'

describeRoutedAdapter('MikroORM 7 / PostgreSQL', routedOptions('postgres'))
describeRoutedAdapter('MikroORM 7 / MariaDB', routedOptions('mysql'))
