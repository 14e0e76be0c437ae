/** Driver settings, EntitySchema, idType bigint and migrations on TypeORM 0.3. */
import { vi } from 'vitest'
import { describeConfiguration } from './configuration'

vi.mock('typeorm', () => import('typeorm-03'))

describeConfiguration('03_')
