'use strict'
// A small NestJS application in this process, for the deployment suites (Cluster, Sentinel, the minimal ACL user):
// a @Cron method every second and a @WithLock method, on SnatchModule.forRoot(options). Decorators are applied as tsc
// compiles them.

require('reflect-metadata')
const { Injectable, Module } = require('@nestjs/common')
const { NestFactory } = require('@nestjs/core')
const { Cron } = require('@nestjs/schedule')
const { currentRun, SnatchModule, WithLock } = require('redis-snatch/nest')
const { until } = require('./util')

/** Applies method decorators `decorators` to `Class.prototype[method]`, as tsc's `__decorate` does. */
function decorate(Class, method, ...decorators) {
  const descriptor = Object.getOwnPropertyDescriptor(Class.prototype, method)
  Object.defineProperty(Class.prototype, method, Reflect.decorate(decorators, Class.prototype, method, descriptor))
}

/**
 * Starts the application on SnatchModule.forRoot(`options`) with schedule `name`; resolves `{ context, runs, charge,
 * close }`: `runs` are the occurrences its @Cron method ran (`{ tick, fence }`), `charge(id)` resolves the fence of a
 * @WithLock call on `orders:<id>`.
 */
async function startNestApp(options, name) {
  const runs = []
  class Jobs {
    async everySecond() {
      const { tick, fence } = currentRun()
      runs.push({ tick: tick.getTime(), fence })
    }

    async charge() {
      return currentRun().fence
    }
  }
  decorate(Jobs, 'everySecond', Cron('* * * * * *', { name, timeZone: 'UTC' }))
  decorate(Jobs, 'charge', WithLock((id) => `orders:${id}`, { wait: 5000 }))
  Injectable()(Jobs)
  class AppModule {}
  Module({ imports: [SnatchModule.forRoot(options)], providers: [Jobs] })(AppModule)
  const context = await NestFactory.createApplicationContext(AppModule, { logger: ['error'], abortOnError: false })
  const jobs = context.get(Jobs)
  return { context, runs, charge: (id) => jobs.charge(id), close: () => context.close() }
}

/**
 * Two applications on SnatchModule.forRoot(`options`) (as two replicas: instances 'nest-a' and 'nest-b') until
 * three occurrences ran; resolves their runs, by tick, and a @WithLock call's fence, having closed both.
 */
async function twoReplicas(options, name) {
  const apps = await Promise.all(['nest-a', 'nest-b'].map((id) => startNestApp({ ...options, instanceId: id }, name)))
  try {
    const all = () => apps.flatMap((app) => app.runs).sort((x, y) => x.tick - y.tick)
    await until(() => new Set(all().map((run) => run.tick)).size >= 3, 'three occurrences to run', 20_000)
    const fence = await apps[0].charge('order-1')
    return { runs: all(), fence }
  } finally {
    await Promise.all(apps.map((app) => app.close()))
  }
}

module.exports = { decorate, startNestApp, twoReplicas }
