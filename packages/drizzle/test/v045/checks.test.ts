import { describeSchemaChecks } from '../support/checks'

describeSchemaChecks('0.45')
