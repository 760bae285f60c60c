/**
 * The unit tier (`npm run test:unit`): `*.unit.test.ts`, rules tested against in-memory fakes
 * (test/fakes/) and fake clocks. No database, no build, no network; the whole tier runs in seconds.
 */
const base = require('./jest.config');

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: base.testEnvironment,
  roots: base.roots,
  transform: base.transform,
  moduleNameMapper: base.moduleNameMapper,
  setupFiles: base.setupFiles,
  testMatch: ['**/*.unit.test.ts'],
  testTimeout: 10000,
};
