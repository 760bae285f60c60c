#!/usr/bin/env bash
# The one test command (`npm test`), the same in CI: lint the document, check generated files,
# type-check, then the whole jest suite on SQLite and again on MariaDB.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== lint openapi/openapi.yaml (spectral:oas)"
npx --no-install spectral lint --fail-severity=warn --ruleset openapi/.spectral.yaml openapi/openapi.yaml
echo "== generated files are fresh"
npx --no-install tsx scripts/generate.ts --check
echo "== type-check"
npx --no-install tsc -p tsconfig.json --noEmit
echo "== jest on SQLite"
TEST_DB=sqlite npx --no-install jest --runInBand "$@"
echo "== jest on MariaDB"
TEST_DB=mysql npx --no-install jest --runInBand "$@"
