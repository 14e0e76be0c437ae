import { describeDatabaseSources } from '../support/adapters'

describeDatabaseSources('1.0')
