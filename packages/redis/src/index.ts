export { RedisLeaseRegistry, type RedisLeaseRegistryOptions } from './lease-registry'
export {
  type RedisServerInput,
  type RedisSourceOptions,
  recommendedRedisOptions,
  type ServedIds,
} from './options'
export { RedisSource } from './redis-source'
