import { describeInProcess } from '../support/adapters'

describeInProcess('0.45', 'postgres')
