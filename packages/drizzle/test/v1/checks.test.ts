import { describeSchemaChecks } from '../support/checks'

describeSchemaChecks('1.0')
