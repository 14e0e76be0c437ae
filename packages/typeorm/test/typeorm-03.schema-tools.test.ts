/** TypeORM 0.3's schema tooling (every `typeorm` import is 0.3.x here). */
import { vi } from 'vitest'
import { describeSchemaTools } from './schema-tools'

vi.mock('typeorm', () => import('typeorm-03'))

describeSchemaTools('03_')
