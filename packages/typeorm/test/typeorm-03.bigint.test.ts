/** idType bigint with loaded entities on TypeORM 0.3 (every `typeorm` import is 0.3.x here). */
import { vi } from 'vitest'
import { describeBigint } from './bigint'

vi.mock('typeorm', () => import('typeorm-03'))

describeBigint('03_')
