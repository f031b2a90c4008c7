// A replica of a NestJS 12 application (ESM-only packages) using redis-snatch/nest as an ES module, for
// nest12.test.js. SNATCH_NEST (JSON): `options` (SnatchModule.forRoot's) and `cron` ({ name, expr }). It reports over
// IPC `ready` (with whether the injected Locker is the one `import { Locker } from 'redis-snatch'` names), each
// occurrence's `start`, and the result of `{ call: 'charge', args, id }`; `{ close: true }` closes the application.
import 'reflect-metadata'
import { Injectable, Module } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { Cron } from '@nestjs/schedule'
import { Locker } from 'redis-snatch'
import { currentRun, InjectLocker, SnatchModule, WithLock } from 'redis-snatch/nest'

const config = JSON.parse(process.env.SNATCH_NEST)
const send = (message) => process.send({ pid: process.pid, ...message })

/** Applies method decorators `decorators` to `Class.prototype[method]`, as tsc's `__decorate` does. */
function decorate(Class, method, ...decorators) {
  const descriptor = Object.getOwnPropertyDescriptor(Class.prototype, method)
  Object.defineProperty(Class.prototype, method, Reflect.decorate(decorators, Class.prototype, method, descriptor))
}

class Jobs {
  constructor(locker) {
    this.locker = locker
  }

  async report() {
    const { tick, fence } = currentRun()
    send({ event: 'start', tick: tick.getTime(), fence: String(fence) })
  }

  async charge(id, ms) {
    const entered = Date.now()
    await new Promise((resolve) => setTimeout(resolve, ms))
    return { fence: String(currentRun().fence), entered, left: Date.now() }
  }
}
decorate(Jobs, 'report', Cron(config.cron.expr, { name: config.cron.name, timeZone: 'UTC' }))
decorate(Jobs, 'charge', WithLock((id) => `orders:${id}`, { wait: 20_000 }))
InjectLocker()(Jobs, undefined, 0)
Injectable()(Jobs)

class AppModule {}
Module({ imports: [SnatchModule.forRoot(config.options)], providers: [Jobs] })(AppModule)

const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] })
const jobs = app.get(Jobs)
process.on('message', async (message) => {
  if (message.close) {
    await app.close()
    process.disconnect()
    return
  }
  send({ event: 'result', id: message.id, value: await jobs[message.call](...message.args) })
})
send({ event: 'ready', sameLocker: jobs.locker instanceof Locker })
