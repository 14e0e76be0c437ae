import { describePreparedInserts } from '../support/prepared'

describePreparedInserts('1.0', 'postgres')
describePreparedInserts('1.0', 'mysql')
