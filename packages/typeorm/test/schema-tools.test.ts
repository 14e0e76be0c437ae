import { describeSchemaTools } from './schema-tools'

describeSchemaTools('')
