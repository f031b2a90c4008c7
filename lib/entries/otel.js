'use strict'
// `require('redis-snatch/otel')`: see lib/otel.js and otel.d.ts.
module.exports = require('../otel')
