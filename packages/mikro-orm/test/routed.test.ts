import { describeRoutedAdapter } from '@shardflake/conformance'
import { routedOptions } from './support/routed-blog'

describeRoutedAdapter('MikroORM 7 / PostgreSQL / in-process', routedOptions('postgres'))
describeRoutedAdapter('MikroORM 7 / MariaDB / in-process', routedOptions('mysql'))
