import { describeMatrix } from '../support/matrix'
import { esBlog } from './entities-es'

describeMatrix('es', esBlog)
