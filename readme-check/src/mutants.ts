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
]
