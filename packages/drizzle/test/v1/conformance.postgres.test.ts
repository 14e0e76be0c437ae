import { describeInProcess } from '../support/adapters'
import { stringBlogTables } from './string-ids'

describeInProcess('1.0', 'postgres', [['string IDs', stringBlogTables]])
