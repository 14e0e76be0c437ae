import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  type BenchResults,
  chartSpec,
  main,
  readResults,
  renderSvg,
  summarize,
  svgPathFor,
} from '../src/index.ts'

const fixture = join(import.meta.dirname, 'fixtures', 'small.chart.json')
const load = async () => readResults(JSON.parse(await readFile(fixture, 'utf8')))
const count = (text: string, part: string) => text.split(part).length - 1
/** The dots: the aria-labels of the symbols in every symbol-mark group, in drawing order. */
const points = (svg: string) =>
  [...svg.matchAll(/<g class="mark-symbol role-mark[^"]*"[^>]*>(.*?)<\/g>/g)].flatMap((group) =>
    [...group[1]!.matchAll(/<path aria-label="([^"]*)"/g)].map((match) => match[1]),
  )

describe('summarize', () => {
  it('divides by the baseline round by round, then takes the median and min..max', async () => {
    const [floor, single, batched] = summarize(await load())
    expect(floor).toMatchObject({ isBaseline: true, median: 1, min: 1, max: 1, text: '1.00×' })
    // 50/100, 60/200, 90/150
    expect(single).toMatchObject({ median: 0.5, min: 0.3, max: 0.6, rounds: 3, text: '0.50×' })
    // 40, 40, 30
    expect(batched).toMatchObject({ median: 40, min: 30, max: 40, text: '40.0×' })
  })

  it('summarizes the values themselves without a baseline', async () => {
    const { baseline: _, ...values } = await load()
    const [floor] = summarize(values)
    expect(floor).toMatchObject({ median: 150, min: 100, max: 200, text: '150 ops/s' })
  })

  it('takes each group against its own baseline', () => {
    const rows = summarize({
      title: 't',
      unit: 'u',
      baseline: 'b',
      rows: [
        { group: 'one', label: 'b', values: [10] },
        { group: 'one', label: 'a', values: [5] },
        { group: 'two', label: 'b', values: [100] },
        { group: 'two', label: 'a', values: [300] },
      ],
    })
    expect(rows.map((row) => row.text)).toEqual(['1.00×', '0.50×', '1.00×', '3.00×'])
  })

  it('refuses a missing baseline and rounds that do not line up', () => {
    const base = { title: 't', unit: 'u', rows: [{ label: 'a', values: [1, 2] }] }
    expect(() => summarize({ ...base, baseline: 'x' })).toThrow(/baseline "x" is not a row/)
    expect(() =>
      summarize({ ...base, baseline: 'a', rows: [...base.rows, { label: 'b', values: [1] }] }),
    ).toThrow(/round by round/)
  })
})

describe('readResults', () => {
  it('names what is wrong', () => {
    expect(() => readResults({ title: 't', unit: 'u', rows: [] }, 'x.json')).toThrow(
      'x.json: "rows" must be a non-empty array',
    )
    expect(() =>
      readResults({ title: 't', unit: 'u', rows: [{ label: 'a', values: [0] }] }),
    ).toThrow('rows[0].values must hold positive finite numbers')
    expect(() =>
      readResults({
        title: 't',
        unit: 'u',
        rows: [
          { label: 'a', values: [1] },
          { label: 'a', values: [2] },
        ],
      }),
    ).toThrow('the label "a" appears twice')
  })
})

describe('renderSvg', () => {
  it('draws the title, every label and one dot per row, with its ratio and spread', async () => {
    const svg = await renderSvg(await load())
    expect(svg.startsWith('<svg')).toBe(true)
    for (const text of ['Small fixture', 'three rows, three rounds', 'floor', 'single', 'batched'])
      expect(svg).toContain(`>${text}<`)
    expect(points(svg)).toEqual([
      'floor: 1.00× (1.00×..1.00×)',
      'single: 0.50× (0.30×..0.60×)',
      'batched: 40.0× (30.0×..40.0×)',
    ])
    expect(svg).toContain('× floor, same run (dot: median of 3 rounds, line: min..max)')
    expect(svg).toContain(
      '<title>Small fixture</title><desc>floor: 1.00×; single: 0.50×; batched: 40.0×</desc>',
    )
  })

  it('draws one panel per group and one dot per row in each', async () => {
    const results: BenchResults = {
      title: 'Groups',
      unit: 'IDs/s',
      baseline: 'peer',
      rows: ['first group', 'second group'].flatMap((group) => [
        { group, label: 'peer', values: [10] },
        { group, label: 'ours', values: [9] },
      ]),
    }
    const svg = await renderSvg(results)
    expect(svg).toContain('>first group<')
    expect(svg).toContain('>second group<')
    expect(points(svg)).toEqual(['peer: 1.00×', 'ours: 0.90×', 'peer: 1.00×', 'ours: 0.90×'])
    expect(count(svg, 'class="mark-symbol role-mark')).toBe(2)
  })

  it('puts ratios over 20× apart on a log axis ticked 1-2-5 per decade', async () => {
    // Ratios 0.3..40: the fixture spans two decades and a half.
    const spec = JSON.stringify(chartSpec(await load()))
    expect(spec).toContain('"type":"log","domain":[0.1,100]')
    expect(spec).toContain('"values":[0.1,0.2,0.5,1,2,5,10,20,50,100]')
    const linear = JSON.stringify(chartSpec({ ...(await load()), scale: 'linear' }))
    expect(linear).not.toContain('"type":"log"')
  })

  it('is the same text for the same results (a regenerated chart makes no diff)', async () => {
    const results = await load()
    expect(await renderSvg(results)).toBe(await renderSvg(results))
  })
})

describe('bench-chart', () => {
  it('writes name.svg beside name.chart.json, or where --out says', async () => {
    expect(svgPathFor('bench/redis.chart.json')).toBe('bench/redis.svg')
    expect(svgPathFor('bench/redis.json')).toBe('bench/redis.svg')
    const dir = await mkdtemp(join(tmpdir(), 'bench-charts-'))
    try {
      const out = join(dir, 'chart.svg')
      expect(await main([fixture, '--out', out])).toBe(0)
      expect(await readFile(out, 'utf8')).toBe(await renderSvg(await load()))
      expect(await main([])).toBe(2)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
