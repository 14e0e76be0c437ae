import { describeInProcess } from './adapters'

describeInProcess('1.x', 'postgres')
