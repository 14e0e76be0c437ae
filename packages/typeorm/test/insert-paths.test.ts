import { describeInsertPaths } from './insert-paths'

describeInsertPaths('')
