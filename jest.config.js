/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': 'ts-jest' },
  testTimeout: 60000,
  // Each test file gets its own database; files run one at a time (--runInBand) to keep the
  // MariaDB load and port use predictable on a 2-core machine.
  setupFiles: ['<rootDir>/test/helpers/env.ts'],
};
