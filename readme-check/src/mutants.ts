/**
 * READMEs broken by hand, the way they rot: the runner must fail on each, with the complaint
 * named in `fails`. They run in the same suite as the quick starts (`run/quick-starts.test.ts`).
 */
export interface Mutant {
  readonly name: string
  readonly readme: string
  /** @default 'default' */
  readonly variant?: string
  /** Text of the README (it must be there) and what replaces its first occurrence. */
  readonly replace: string
  readonly with: string
  /** What the failure says. */
  readonly fails: RegExp
}

export const MUTANTS: readonly Mutant[] = [
  {
    name: 'TypeORM without synchronize: the tables do not exist',
    readme: 'packages/typeorm/README.md',
    replace: '  synchronize: true, // creates the tables; use migrations in production (below)\n',
    with: '',
    fails: /relation "post" does not exist/,
  },
  {
    name: 'TypeORM install line without pg: the driver is missing',
    readme: 'packages/typeorm/README.md',
    replace: 'typeorm pg   #',
    with: 'typeorm   #',
    fails: /Postgres package has not been found installed/,
  },
  {
    name: 'TypeORM comments on a fixed shard: the check finds them off their post',
    readme: 'packages/typeorm/README.md',
    replace: "@ShardedId<Comment>({ sameShardAs: 'post' })",
    with: '@ShardedId<Comment>({ shard: 7 })',
    fails: /comment \d+ is on shard 7, but belongs on shard 1341/,
  },
  {
    name: 'core: a comment placed by the modulo of its post ID (not the shard inside it)',
    readme: 'packages/core/README.md',
    variant: 'homes',
    replace: 'source.nextId(sharding.shardOfId(postId))',
    with: 'source.nextId(sharding.shardForKey(postId))',
    fails: /does not print 1341 1341/,
  },
  {
    name: 'core: shard homes with every post written through server a',
    readme: 'packages/core/README.md',
    variant: 'homes',
    replace: 'for (const [, { handle, items }] of groups) {',
    with: 'for (const [, { items }] of groups) {\n  const handle = servers.a',
    fails: /expected 0 posts on server a, found 2/,
  },
  {
    name: 'core: shard homes with the single post written through server a',
    readme: 'packages/core/README.md',
    variant: 'homes',
    replace: 'const { handle } = homes.writeHomeNow(shard) ?? (await homes.writeHome(shard))',
    with: 'const handle = servers.a',
    fails: /expected 0 posts on server a, found 1/,
  },
  {
    name: 'core: move.ts without deleteMovedRows: the old copy stays on server a',
    readme: 'packages/core/README.md',
    variant: 'homes',
    replace: 'const deleted = await deleteMovedRows({',
    with: 'const deleted = 0 && await deleteMovedRows({',
    fails: /expected 0 posts on server a, found 1/,
  },
  {
    name: 'core: ids.ts installs next_id() on the new home instead of moving IDs: a still issues them',
    readme: 'packages/core/README.md',
    variant: 'homes',
    replace: 'movePostgresShards({ sharding, shards, from: pools[from]!, to: pools[to]! }),',
    with: 'installPostgres(pools[to]!, { sharding, shards }),',
    fails: /server a still issues IDs of shard 16/,
  },
  {
    name: 'Prisma schema without its datasource: prisma generate fails',
    readme: 'packages/prisma/README.md',
    variant: 'postgres',
    replace: 'datasource db {\n  provider = "postgresql"\n}',
    with: '',
    fails: /You don't have any datasource defined/,
  },
  {
    name: 'Prisma comments on a fixed shard (MariaDB): the check finds them off their post',
    readme: 'packages/prisma/README.md',
    variant: 'mariadb',
    replace: '/// @shardedId(sameShardAs: post)',
    with: '/// @shardedId(shard: 3)',
    fails: /comment \d+ is on shard 3, but belongs on shard 18/,
  },
  {
    name: 'MikroORM without orm.schema.create(): the tables do not exist',
    readme: 'packages/mikro-orm/README.md',
    replace: 'await orm.schema.create()',
    with: '',
    fails: /relation "user" does not exist/,
  },
  {
    name: 'Kysely posts on a fixed shard: the check finds them off their author',
    readme: 'packages/kysely/README.md',
    replace: "posts: { sameShardAs: 'author_id' }, // on its author's shard",
    with: "posts: { shard: 7 }, // on its author's shard",
    fails: /post \d+ is on shard 7, but belongs on shard 18/,
  },
  {
    name: 'Kysely without the plugin: the key column stays empty',
    readme: 'packages/kysely/README.md',
    replace: '  plugins: [ids],\n',
    with: '',
    fails: /null value in column "id"/,
  },
  {
    name: 'Drizzle comments on a fixed shard: the check finds them off their post',
    readme: 'packages/drizzle/README.md',
    replace: "shardedId(bigint({ mode: 'bigint' }), { sameShardAs: 'postId' })",
    with: "shardedId(bigint({ mode: 'bigint' }), { shard: 7 })",
    variant: 'postgres',
    fails: /comment \d+ is on shard 7, but belongs on shard 18/,
  },
  {
    name: 'Drizzle homes: every shard on server a, so rows of b are written on a',
    readme: 'packages/drizzle/README.md',
    replace: "    { from: 0, to: 31, target: 'a' },\n    { from: 32, to: 63, target: 'b' },",
    with: "    { from: 0, to: 63, target: 'a' },",
    variant: 'postgres',
    fails: /expected 1 post on server a, found 2/,
  },
  {
    name: 'Kysely homes: the tables created on no server',
    readme: 'packages/kysely/README.md',
    replace: 'for (const name of homes.serverNames) {\n  const db = homes.handleOf(name)',
    with: 'for (const name of [] as string[]) {\n  const db = homes.handleOf(name)',
    fails: /relation "users" does not exist/,
  },
  {
    name: 'Drizzle on MariaDB with a pool that reads BIGINT as numbers: refused at startup',
    readme: 'packages/drizzle/README.md',
    replace: '  bigNumberStrings: true,\n',
    with: '',
    variant: 'mariadb',
    fails: /reads BIGINT as JavaScript numbers/,
  },
  {
    name: 'PostgreSQL: the routed insert without its table',
    readme: 'packages/postgres/README.md',
    replace: '`CREATE TABLE IF NOT EXISTS shard_',
    with: '`SELECT 1 -- CREATE TABLE IF NOT EXISTS shard_',
    fails: /relation "shard_45.posts" does not exist/,
  },
  {
    name: "MySQL: the SQL block inserts with another shard's next_id()",
    readme: 'packages/mysql/README.md',
    replace: 'VALUES (shard_45.next_id(), 31341',
    with: 'VALUES (shard_44.next_id(), 31341',
    fails: /post \d+ is on shard 44, but belongs on shard 45/,
  },
  {
    name: 'CLI installed without @shardflake/postgres: install postgres cannot run',
    readme: 'packages/cli/README.md',
    replace: 'pnpm add -D @shardflake/postgres pg',
    with: 'pnpm add -D pg',
    fails: /@shardflake\/postgres/,
  },
]
