import { describeDatabaseSources } from '../support/adapters'

describeDatabaseSources('0.45')
