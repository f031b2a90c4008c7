// Types of the ES module entry (prometheus.mjs): the same declarations as the CommonJS entry.
export * from './prometheus.js'
