/** Database sources on TypeORM 0.3 (every `typeorm` import is 0.3.x here). */
import { vi } from 'vitest'
import { describeDatabaseSources } from './database-sources'

vi.mock('typeorm', () => import('typeorm-03'))

describeDatabaseSources('0.3')
