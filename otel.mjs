// ES module entry of redis-snatch/otel: the CommonJS module's export.
import cjs from './otel.js'

export const { instrument } = cjs
