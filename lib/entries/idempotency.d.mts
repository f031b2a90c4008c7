// Types of the ES module entry (idempotency.mjs): the same declarations as the CommonJS entry.
export * from './idempotency.js'
