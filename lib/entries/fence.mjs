// ES module entry of redis-snatch/fence: the CommonJS module's exports.
import cjs from './fence.js'

export const { fenced, fenceTableSql, StaleFenceError } = cjs
