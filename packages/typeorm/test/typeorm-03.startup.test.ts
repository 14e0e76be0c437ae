/** The startup checks on TypeORM 0.3 (every `typeorm` import is 0.3.x here). */
import { vi } from 'vitest'
import { describeStartup } from './startup'

vi.mock('typeorm', () => import('typeorm-03'))

describeStartup('03_')
