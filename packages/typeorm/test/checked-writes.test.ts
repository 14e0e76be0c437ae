import { describeCheckedWrites } from './checked-writes'

describeCheckedWrites('')
