#!/usr/bin/env node
import helper from '@prisma/generator-helper'
import { generate, manifest } from './generator'

// @prisma/generator-helper is CommonJS without named-export hints: read it from the default export.
helper.generatorHandler({ onManifest: manifest, onGenerate: generate })
