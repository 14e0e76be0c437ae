/** The checked-write tests on TypeORM 0.3 (every `typeorm` import is 0.3.x here). */
import { vi } from 'vitest'
import { describeCheckedWrites } from './checked-writes'

vi.mock('typeorm', () => import('typeorm-03'))

describeCheckedWrites('03_')
