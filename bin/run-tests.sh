#!/usr/bin/env bash
# README command 2: install (bin/install.sh), then run pytest from the repository root.
#   bin/run-tests.sh                 # = pytest -q tests kafka_ha
#   bin/run-tests.sh -k ensemble -x  # any pytest arguments
# Exit code: pytest's, except "no tests collected" (5), which is a failure (1).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
bash "$ROOT/bin/install.sh" || exit $?
cd "$ROOT" || exit 1
[ $# -gt 0 ] || set -- -q tests kafka_ha
"$ROOT/.venv/bin/python" -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "run-tests: pytest collected no tests" >&2
  rc=1
fi
exit "$rc"
