import { definedBlog } from './support/entities-define'
import { describeMatrix } from './support/matrix'

describeMatrix('define', definedBlog)
