import { describeDefaultFn } from '../support/default-fn'

describeDefaultFn('0.45', 'postgres')
describeDefaultFn('0.45', 'mysql')
