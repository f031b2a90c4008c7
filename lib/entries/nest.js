'use strict'
// `require('redis-snatch/nest')`: see lib/nest and nest.d.ts.
module.exports = require('../nest')
