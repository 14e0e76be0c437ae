export {
  type RedisServerInput,
  RedisSource,
  type RedisSourceOptions,
  recommendedRedisOptions,
  type ServedIds,
} from './redis-source'
export { ID_SCRIPT, ID_SCRIPT_SHA } from './script'
