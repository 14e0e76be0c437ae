import { describeMatrix } from './support/matrix'

describeMatrix('mysql')
