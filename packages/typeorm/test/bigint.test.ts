import { describeBigint } from './bigint'

describeBigint('')
