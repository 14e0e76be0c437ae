import { describeRoutedAdapter } from '@shardflake/conformance'
import { routedOptions } from './support/routed-blog'

describeRoutedAdapter('Sequelize 6 / PostgreSQL', routedOptions('postgres'))
describeRoutedAdapter('Sequelize 6 / MariaDB', routedOptions('mysql'))
