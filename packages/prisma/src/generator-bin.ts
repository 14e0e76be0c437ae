#!/usr/bin/env node
import helper from '@prisma/generator-helper'
import { ShardflakeError } from '@shardflake/core'
import { generate, manifest } from './generator'

// @prisma/generator-helper is CommonJS without named-export hints: read it from the default export.
helper.generatorHandler({
  onManifest: manifest,
  async onGenerate(options) {
    try {
      await generate(options)
    } catch (error) {
      // prisma generate prints only the message: name the error class and code in it.
      if (!(error instanceof ShardflakeError)) throw error
      throw new Error(`${error.name} (${error.code}): ${error.message}`, { cause: error })
    }
  },
})
