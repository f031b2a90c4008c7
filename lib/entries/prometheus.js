'use strict'
// `require('redis-snatch/prometheus')`: see lib/prometheus.js and prometheus.d.ts.
module.exports = require('../prometheus')
