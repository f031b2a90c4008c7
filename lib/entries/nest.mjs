// ES module entry of redis-snatch/nest: the CommonJS module's exports (one instance, shared with require()).
import cjs from './nest.js'

export const { SnatchModule, InjectLocker, SnatchSchedule, SnatchHandler, WithLock, Snatch, currentRun } = cjs
