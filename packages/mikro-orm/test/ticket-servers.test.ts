import { describePlainIdAdapter } from '@shardflake/conformance'
import { mikroBlog } from './support/blog'
import { legacyBlog } from './support/entities-legacy'
import { ticketSource } from './support/sources'

describePlainIdAdapter('MikroORM / MariaDB / TicketServerSource / legacy decorators', {
  dialect: 'mysql',
  database: 'sf_mikro_tickets',
  createSource: (raw) => ticketSource(raw, `sf_mikro_tix_${process.pid}_`),
  setup: (context) => mikroBlog('mysql', legacyBlog, context),
})
