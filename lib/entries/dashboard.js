'use strict'
// `require('redis-snatch/dashboard')`: see lib/dashboard and dashboard.d.ts.
module.exports = require('../dashboard')
