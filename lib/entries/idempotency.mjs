// ES module entry of redis-snatch/idempotency: the CommonJS module's exports (one instance, shared with require()).
import cjs from './idempotency.js'

export const { idempotency, fastifyIdempotency } = cjs
