#!/usr/bin/env bash
# The one test command (`npm test`), the same in CI: type-check, then the whole jest suite on
# SQLite and again on MariaDB (the MariaDB run is required, not skipped: it fails when MariaDB
# does not answer). The document lint and the generated-files check are jest tests
# (test/contract/generated.test.ts); they do not depend on the database and run once.
set -euo pipefail
cd "$(dirname "$0")/.."
# The SDK package has its own dev dependency (fastify, for its webhook-handler test).
if [ ! -d sdk/node_modules/fastify ]; then
  echo "== installing the SDK's dev dependencies (sdk/package-lock.json)"
  npm ci --prefix sdk --no-audit --no-fund
fi
echo "== type-check"
npx --no-install tsc -p tsconfig.json --noEmit
echo "== jest on SQLite"
TEST_DB=sqlite npx --no-install jest --runInBand "$@"
echo "== jest on MariaDB"
TEST_DB=mysql npx --no-install jest --runInBand --testPathIgnorePatterns test/contract/generated.test.ts "$@"
