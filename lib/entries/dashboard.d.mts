// Types of the ES module entry (dashboard.mjs): the same declarations as the CommonJS entry.
export * from './dashboard.js'
