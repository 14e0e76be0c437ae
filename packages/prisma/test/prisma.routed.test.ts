import { describeRoutedAdapter } from '@shardflake/conformance'
import { routedOptions } from './routed-blog'

describeRoutedAdapter('Prisma 7 / PostgreSQL / in-process', routedOptions('postgres'))
describeRoutedAdapter('Prisma 7 / MariaDB / in-process', routedOptions('mysql'))
