/** Plain IDs from Flickr-style ticket servers (on MariaDB), written into both servers' blogs. */
import { describePlainIdAdapter } from '@shardflake/conformance'
import { kyselyBlog } from './support/blog'
import { ticketSource } from './support/sources'

for (const dialect of ['postgres', 'mysql'] as const) {
  describePlainIdAdapter(
    `Kysely / ${dialect === 'postgres' ? 'PostgreSQL' : 'MariaDB'} / TicketServerSource`,
    {
      dialect,
      database: `sf_kysely_${dialect === 'postgres' ? 'pg' : 'my'}_tickets`,
      createSource: () => ticketSource(`t${dialect === 'postgres' ? 'pg' : 'my'}`),
      setup: (context) => kyselyBlog(dialect, context),
    },
  )
}
