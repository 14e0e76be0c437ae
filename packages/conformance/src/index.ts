export { describeIdSource, type IdSourceSuiteOptions } from './source-suite'
