/**
 * `node --import ./src/hooks.ts src/main.ts [--dialect=postgres|mariadb|both] [--orm=typeorm,prisma,mikro-orm] [--json]`
 *
 * Starts three throwaway servers (a, b, c) of each dialect, writes users, posts and comments
 * through each ORM, checks where every row is by raw SQL on each server, prints a short report,
 * and exits with 1 when any row is off its shard's server or any check failed.
 */
import { parseArgs } from 'node:util'
import { describeReport, type OrmReport, runOrm } from './app.ts'
import { ORMS, type OrmName } from './blog.ts'
import { type ExampleDialect, startExampleServers } from './servers.ts'

const { values } = parseArgs({
  // `pnpm start -- --dialect=mariadb` passes the `--` on.
  args: process.argv.slice(2).filter((arg) => arg !== '--'),
  options: {
    dialect: { type: 'string', default: 'postgres' },
    orm: { type: 'string', default: ORMS.join(',') },
    json: { type: 'boolean', default: false },
  },
})
const dialects: ExampleDialect[] =
  values.dialect === 'both' ? ['postgres', 'mariadb'] : [values.dialect as ExampleDialect]
for (const dialect of dialects) {
  if (dialect !== 'postgres' && dialect !== 'mariadb') {
    throw new Error(`--dialect takes postgres, mariadb or both, got ${dialect}`)
  }
}
const orms = values.orm.split(',').map((name) => name.trim()) as OrmName[]
for (const orm of orms) {
  if (!ORMS.includes(orm)) throw new Error(`--orm takes ${ORMS.join(', ')}, got ${orm}`)
}

const reports: OrmReport[] = []
for (const dialect of dialects) {
  if (!values.json) console.log(`Starting three ${dialect} servers (a, b, c)...`)
  const servers = await startExampleServers(dialect)
  try {
    if (!values.json) {
      console.log('64 logical shards: 0-20 on a, 21-41 on b, 42-63 on c')
    }
    for (const orm of orms) {
      const report = await runOrm(servers, orm)
      reports.push(report)
      if (!values.json) console.log(describeReport(report).join('\n'))
    }
  } finally {
    await servers.close()
  }
}
if (values.json) console.log(JSON.stringify(reports, null, 2))
const failed = reports.filter((report) => report.problems.length > 0)
if (!values.json) {
  console.log(
    failed.length === 0
      ? `Every row is on its shard's server (${reports.length} runs).`
      : `${failed.length} of ${reports.length} runs FAILED.`,
  )
}
process.exitCode = failed.length === 0 ? 0 : 1
