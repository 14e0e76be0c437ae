import { legacyBlog } from './support/entities-legacy'
import { describeMatrix } from './support/matrix'

describeMatrix('legacy', legacyBlog)
