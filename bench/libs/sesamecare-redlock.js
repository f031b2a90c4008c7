'use strict'
// @sesamecare-oss/redlock, the maintained fork of redlock 5, on one ioredis client.

const { Redlock, ExecutionError, ResourceLockedError } = require('@sesamecare-oss/redlock')
const { redlockAdapter } = require('./redlock-api')

module.exports = { create: redlockAdapter({ Redlock, ExecutionError, ResourceLockedError }) }
