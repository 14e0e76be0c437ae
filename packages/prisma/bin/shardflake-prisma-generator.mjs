#!/usr/bin/env node
// A committed entry, so package managers can link the bin before the first build.
import '../dist/generator-bin.mjs'
