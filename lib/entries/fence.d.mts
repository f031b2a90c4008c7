// Types of the ES module entry (fence.mjs): the same declarations as the CommonJS entry.
export * from './fence.js'
