// Type test of redis-snatch/prometheus's registerMetrics with prom-client's own Registry types.
import { collectDefaultMetrics, register, Registry } from 'prom-client'
import { createLocker } from 'redis-snatch'
import { registerMetrics, type RegisterMetricsOptions } from 'redis-snatch/prometheus'

export async function usage(): Promise<string> {
  const locker = createLocker({ url: 'redis://127.0.0.1:6379' })
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  const options: RegisterMetricsOptions = { fleet: true, name: 'orders' }
  registerMetrics(locker, registry, options).disable()
  registerMetrics(locker, register)
  registerMetrics(locker, registry, { keyLabel: (key) => key.split(':')[0], name: 'by-prefix' }).disable()
  // @ts-expect-error keyLabel is a boolean or a function of the key
  registerMetrics(locker, registry, { keyLabel: 'key' })
  // @ts-expect-error a Registry, not prom-client's module
  registerMetrics(locker, { Registry })
  // @ts-expect-error name is a string
  registerMetrics(locker, registry, { name: 1 })
  return registry.metrics()
}
