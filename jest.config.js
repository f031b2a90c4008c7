'use strict'

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  testMatch: ['<rootDir>/__test__/**/*.test.js'],
  globalSetup: '<rootDir>/__test__/support/global-setup.js',
  globalTeardown: '<rootDir>/__test__/support/global-teardown.js',
  testTimeout: 30000,
  maxWorkers: 2,
}
