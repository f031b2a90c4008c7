// ES module entry of redis-snatch/dashboard: the CommonJS module's export (one instance, shared with require()).
import cjs from './dashboard.js'

export const { createDashboard } = cjs
