export {
  type AdapterSetupContext,
  type AdapterSuiteOptions,
  type BlogThroughOrm,
  blogSchemaSql,
  CountingSource,
  describeAdapter,
  type OrmId,
} from './adapter-suite'
export {
  type Dialect,
  freshDatabase,
  mysqlUrl,
  postgresUrl,
  type RawDatabase,
} from './databases'
export { describePlainIdAdapter, type PlainIdSuiteOptions } from './plain-id-suite'
export { describeIdSource, type IdSourceSuiteOptions } from './source-suite'
