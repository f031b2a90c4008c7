// ES module entry of redis-snatch/otel: the CommonJS module's export (one instance, shared with require()).
import cjs from './otel.js'

export const { instrument } = cjs
