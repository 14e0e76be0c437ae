// `pnpm generate`: the Prisma clients and shardflake metadata the tests and `tsc` need, in the
// gitignored `generated/` folder (vitest's globalSetup does the same before the tests).
import setup from './global-setup.ts'

await setup()
