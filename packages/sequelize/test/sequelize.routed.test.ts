import { describeRoutedAdapter } from '@shardflake/conformance'
import { routedOptions } from './support/routed-blog'

describeRoutedAdapter('Sequelize 6 / PostgreSQL / in-process', routedOptions('postgres'))
describeRoutedAdapter('Sequelize 6 / MariaDB / in-process', routedOptions('mysql'))
