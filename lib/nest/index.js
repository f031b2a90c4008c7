'use strict'
// `require('redis-snatch/nest')`: NestJS integration (see docs/nestjs.md and nest.d.ts).

for (const peer of ['@nestjs/common', '@nestjs/core']) {
  try {
    require.resolve(peer)
  } catch (cause) {
    const err = new Error(`redis-snatch/nest needs ${peer} (a NestJS application has it): npm install ${peer}`, { cause })
    err.code = 'MODULE_NOT_FOUND'
    throw err
  }
}

const { InjectLocker, SnatchSchedule, SnatchHandler, WithLock, Snatch } = require('./decorators')
const { SnatchModule } = require('./module')
const { currentRun } = require('./run-context')

module.exports = { SnatchModule, InjectLocker, SnatchSchedule, SnatchHandler, WithLock, Snatch, currentRun }
