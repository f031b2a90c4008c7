'use strict'
// `require('redis-snatch/idempotency')`: see lib/idempotency.js and idempotency.d.ts.
module.exports = require('../idempotency')
