// Types of the ES module entry (index.mjs): the same declarations as the CommonJS entry, without a default export.
export * from './index.js'
