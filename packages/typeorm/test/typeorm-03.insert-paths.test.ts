/** The insert-path tests on TypeORM 0.3 (every `typeorm` import is 0.3.x here). */
import { vi } from 'vitest'
import { describeInsertPaths } from './insert-paths'

vi.mock('typeorm', () => import('typeorm-03'))

describeInsertPaths('03_')
