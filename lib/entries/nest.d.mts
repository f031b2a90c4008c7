// Types of the ES module entry (nest.mjs): the same declarations as the CommonJS entry.
export * from './nest.js'
