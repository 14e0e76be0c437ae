import { defineLayout, InvalidArgumentError, type Layout, presets } from '@shardflake/core'
import { type Command, Option } from 'commander'

/** The options {@link addLayoutOptions} adds, as commander parses them. */
export interface LayoutFlags {
  layout?: string
  epoch?: string
  timeBits?: string
  shardBits?: string
  sequenceBits?: string
  workerBits?: string
  timeUnitMs?: string
}

/**
 * Adds the flags that choose a layout: a preset (`--layout instagram`, the default), or a preset
 * with another epoch, or widths of your own.
 */
export function addLayoutOptions(command: Command): Command {
  return command
    .addOption(
      new Option('--layout <preset>', 'layout preset')
        .choices(Object.keys(presets))
        .default('instagram'),
    )
    .option('--epoch <ms|ISO>', "epoch (ms since 1970 or ISO date); replaces the preset's")
    .option('--time-bits <n>', 'width of the time field')
    .option('--shard-bits <n>', 'width of the shard field')
    .option('--sequence-bits <n>', 'width of the sequence field')
    .option('--worker-bits <n>', 'width of the worker field')
    .option('--time-unit-ms <n>', 'ms per tick of the time field')
}

/**
 * The layout the flags describe. With only `--layout`, the preset itself; any other flag defines a
 * custom layout based on the preset.
 * @throws InvalidLayoutError / InvalidArgumentError with a message for the user.
 */
export function readLayout(flags: LayoutFlags): Layout {
  const name = (flags.layout ?? 'instagram') as keyof typeof presets
  const preset = presets[name]
  if (!preset)
    throw new InvalidArgumentError(`Unknown layout preset ${JSON.stringify(flags.layout)}.`)
  const custom = [
    flags.epoch,
    flags.timeBits,
    flags.shardBits,
    flags.sequenceBits,
    flags.workerBits,
    flags.timeUnitMs,
  ]
  if (custom.every((value) => value === undefined)) return preset
  return defineLayout({
    name: flags.epoch === undefined ? name : 'custom',
    epoch: flags.epoch ?? preset.epoch,
    timeBits: integer('--time-bits', flags.timeBits) ?? preset.timeBits,
    shardBits: integer('--shard-bits', flags.shardBits) ?? preset.shardBits,
    sequenceBits: integer('--sequence-bits', flags.sequenceBits) ?? preset.sequenceBits,
    workerBits: integer('--worker-bits', flags.workerBits) ?? preset.workerBits,
    timeUnitMs: integer('--time-unit-ms', flags.timeUnitMs) ?? preset.timeUnitMs,
    order: preset.order,
    allowSignBit: preset.allowSignBit,
    decodeOnly: preset.decodeOnly,
  })
}

function integer(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined
  if (!/^\d+$/.test(value))
    throw new InvalidArgumentError(`${flag} must be a whole number, got ${JSON.stringify(value)}.`)
  return Number(value)
}
