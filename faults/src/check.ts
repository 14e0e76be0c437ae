import { expect } from 'vitest'
import type { ScenarioFigures } from './figures'

/**
 * The suite's assertions, on counts only: no ID repeated, every source issued IDs, every error a
 * ShardflakeError with a fault code, every batch of the asked size and shard, no committed row
 * lost. Wall-clock figures are reported, never asserted.
 */
export function checkScenario(figures: ScenarioFigures): void {
  expect(figures.repeats, 'IDs issued twice').toBe(0)
  for (const source of figures.sources) {
    expect(source.ids, `${source.source} issued IDs`).toBeGreaterThan(0)
    expect(source.untyped, `${source.source}: errors that are not a typed fault`).toEqual([])
    expect(source.wrongShard, `${source.source}: IDs of another shard`).toBe(0)
    expect(source.wrongCount, `${source.source}: batches of the wrong size`).toBe(0)
    expect(source.wrongTimeExamples, `${source.source}: IDs with a time before the run`).toEqual([])
  }
  for (const [table, rows] of Object.entries(figures.rows)) {
    expect(rows.committed, `${table}: committed rows`).toBeGreaterThan(0)
    expect(rows.lost, `${table}: committed rows lost`).toBe(0)
  }
}
