'use strict'
// redlock 5 (beta), the original Redlock for Node, on one ioredis client.

const { default: Redlock, ExecutionError, ResourceLockedError } = require('redlock')
const { redlockAdapter } = require('./redlock-api')

module.exports = { create: redlockAdapter({ Redlock, ExecutionError, ResourceLockedError }) }
