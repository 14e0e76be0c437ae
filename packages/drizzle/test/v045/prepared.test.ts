import { describePreparedInserts } from '../support/prepared'

describePreparedInserts('0.45', 'postgres')
describePreparedInserts('0.45', 'mysql')
