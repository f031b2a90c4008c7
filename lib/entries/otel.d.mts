// Types of the ES module entry (otel.mjs): the same declarations as the CommonJS entry.
export * from './otel.js'
