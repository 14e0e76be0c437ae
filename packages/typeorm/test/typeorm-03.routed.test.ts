/** The routed suite on TypeORM 0.3: every `typeorm` import (adapter and entities) is 0.3.x here. */
import { describeRoutedAdapter } from '@shardflake/conformance'
import { vi } from 'vitest'
import { routedOptions } from './routed-blog'

vi.mock('typeorm', () => import('typeorm-03'))

describeRoutedAdapter('TypeORM 0.3 / PostgreSQL', routedOptions('postgres'))
