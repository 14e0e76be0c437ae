import { describeMatrix } from './support/matrix'

describeMatrix('postgres')
