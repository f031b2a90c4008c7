'use strict'
// `require('redis-snatch/fence')`: see lib/fence.js and fence.d.ts.
module.exports = require('../fence')
