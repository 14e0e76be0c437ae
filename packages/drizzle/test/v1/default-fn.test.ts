import { describeDefaultFn } from '../support/default-fn'

describeDefaultFn('1.0', 'postgres')
describeDefaultFn('1.0', 'mysql')
