import { describeDatabaseSources } from './database-sources'

describeDatabaseSources('1.x')
