import { describePlainIdAdapter } from '@shardflake/conformance'
import { blogOnTypeorm } from './blog'
import { ticketSource } from './sources'

describePlainIdAdapter('TypeORM 1.x / MariaDB / TicketServerSource', {
  dialect: 'mysql',
  database: 'sf_typeorm_tickets',
  createSource: (raw) => ticketSource(raw, 'sf_typeorm_tix_'),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source),
})
