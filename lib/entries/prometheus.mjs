// ES module entry of redis-snatch/prometheus: the CommonJS module's exports (one instance, shared with require()).
import cjs from './prometheus.js'

export const { createMetricsHandler, registerMetrics } = cjs
