import { describeStartup } from './startup'

describeStartup('')
