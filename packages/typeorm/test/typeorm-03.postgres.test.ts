/** The same suite on TypeORM 0.3: every `typeorm` import (adapter and entities) is 0.3.x here. */
import { vi } from 'vitest'
import { describeInProcess } from './adapters'

vi.mock('typeorm', () => import('typeorm-03'))

describeInProcess('0.3', 'postgres')
