#!/usr/bin/env bash
# The one test command (`npm test`), the same in CI. Fast checks first, each failing the run:
#   1. the unit tier (`npm run test:unit`: *.unit.test.ts, in-memory fakes, no database, no build),
#   2. ESLint and the import rules (`npm run lint`), the formatting (`npm run format:check`),
#   3. the type-check,
#   4. the whole jest suite on SQLite and again on MariaDB (required, not skipped: it fails when
#      MariaDB does not answer). The document lint and the generated-files check are jest tests
#      (test/contract/generated.test.ts); they do not depend on the database and run once.
# Extra arguments (test files, jest options) go to every jest run.
set -euo pipefail
cd "$(dirname "$0")/.."
# The SDK package has its own dev dependency (fastify, for its webhook-handler test).
if [ ! -d sdk/node_modules/fastify ]; then
  echo "== installing the SDK's dev dependencies (sdk/package-lock.json)"
  npm ci --prefix sdk --no-audit --no-fund
fi

# Every test file makes its own database, data directory, ports and Redis key prefix, so files run
# two at a time. These run alone afterwards: they measure time or CPU (a neighbour would make them
# flaky), kill and restart servers of their own, or drive Chromium. test/window/markdown.test.ts runs
# two at a time: it compares the CPU times of two input sizes in the same run, which a neighbour
# does not skew the way it skews a budget in milliseconds.
SERIAL='test/(drills|bench|browser|fuzz)/'
SERIAL+='|test/transport/swagger-ui\.test'             # Chromium
SERIAL+='|test/webhooks/(worker-faults|schedule|claim-ahead|claim-contention)\.test' # timing of claims and retries
SERIAL+='|test/api/sqlite-writers\.test'                # several processes contending for one SQLite file
UNIT='\.unit\.test\.ts$'

# jest on one engine: the independent files on two workers, then the serial group in band.
suite() {
  local db=$1
  shift
  echo "== jest on $db: independent files, two at a time"
  TEST_DB=$db npx --no-install jest "$@" --maxWorkers=2 --passWithNoTests --testPathIgnorePatterns "$UNIT" "$SERIAL" "${IGNORE[@]}"
  echo "== jest on $db: files that run alone"
  # Selected by ignoring every other file, so that test files named on the command line still narrow both runs.
  TEST_DB=$db npx --no-install jest "$@" --runInBand --passWithNoTests --testPathIgnorePatterns "$UNIT" "^(?!.*($SERIAL))" "${IGNORE[@]}"
}

echo "== unit tier"
npx --no-install jest -c jest.unit.config.js --passWithNoTests
echo "== lint (ESLint, import rules)"
npm run -s lint
echo "== format"
npm run -s format:check
echo "== type-check"
npx --no-install tsc -p tsconfig.json --noEmit
IGNORE=()
suite sqlite "$@"
# On MariaDB, not again what no engine changes: the generated files and the document lint, the SDK's
# tarball, the markdown parser (pure code), the SDK's webhook replay store (Redis only), the Prism
# walk (the contract tests hold every answer to the documents on both engines already), and the
# Chromium tests: they drive the browser code over the same API answers, which the API tests hold
# on both engines; run once, they keep npm test inside CI's time.
IGNORE=(test/contract/generated.test.ts test/sdk/packaging.test.ts test/window/markdown.test.ts test/sdk/webhook-replay.test.ts test/contract/prism-proxy.test.ts test/browser/ test/transport/swagger-ui.test.ts)
suite mysql "$@"
