/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': 'ts-jest' },
  // The SDK's sources write `.js` in relative imports (Node's ES module loader needs it); jest maps them back to the .ts file.
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  testTimeout: 60000,
  // Each test file gets its own database, data directory and ports: scripts/test.sh runs them two
  // at a time, and the files that time things or kill servers one at a time.
  setupFiles: ['<rootDir>/test/helpers/env.ts'],
  // The chat window's files come from the build (dist/): made once here when the sources changed.
  globalSetup: '<rootDir>/test/helpers/build.ts',
};
