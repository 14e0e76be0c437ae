import { describeRoutedAdapter } from '@shardflake/conformance'
import { routedOptions } from './routed-blog'

describeRoutedAdapter('Prisma 7 / PostgreSQL', routedOptions('postgres'))
describeRoutedAdapter('Prisma 7 / MariaDB', routedOptions('mysql'))
