import { MemoryLeaseRegistry } from '@shardflake/core'
import { describeLeaseRegistry } from '../src'

const registries = new Map<string, MemoryLeaseRegistry>()

describeLeaseRegistry('MemoryLeaseRegistry', {
  open: (storage, { maxTtlMs }) => {
    const registry = registries.get(storage) ?? new MemoryLeaseRegistry({ maxTtlMs })
    registries.set(storage, registry)
    return registry
  },
  drop: async (storage) => {
    registries.delete(storage)
  },
  inMemory: true,
  reserved: [],
})
