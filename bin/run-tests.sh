#!/usr/bin/env bash
# README command 2: install (bin/install.sh), then run pytest from the repository root.
#   bin/run-tests.sh                    # = pytest -q -n 2 --dist loadfile tests kafka_ha, with a coverage summary
#   bin/run-tests.sh -k ensemble -x     # any pytest arguments
#   bin/run-tests.sh -m "not system" tests kafka_ha   # no system tier: unit, contract, doctests
#   bin/run-tests.sh --no-cov tests/unit
# Without arguments the tests run in two pytest-xdist workers, a test file per worker at a
# time (the machines have 2 cores; system tests mostly wait on processes and timeouts):
# KAFKA_HA_TEST_WORKERS=1 runs them in one process.
# Coverage (pytest-cov, settings in setup.cfg) is of kafka_ha in the pytest process only;
# the summary lists the modules below 100%.
# Exit code: pytest's, except "no tests collected" (5), which is a failure (1).
set -uo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  cat <<'USAGE'
USAGE: bin/run-tests.sh [pytest arguments]
Install, then run pytest from the repository root (default: tests kafka_ha in
KAFKA_HA_TEST_WORKERS=2 pytest-xdist workers, one test file per worker at a time).
Option                                  Description
------                                  -----------
--no-cov                                No coverage summary
<pytest arguments>                      Passed to pytest (-k, -x, -m, paths)
-h, --help                              Print this usage and exit
USAGE
  exit 0
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
bash "$ROOT/bin/install.sh" || exit $?
cd "$ROOT" || exit 1
if [ $# -eq 0 ]; then
  workers="${KAFKA_HA_TEST_WORKERS:-2}"
  if [ "$workers" -gt 1 ]; then
    set -- -q -n "$workers" --dist loadfile tests kafka_ha
  else
    set -- -q tests kafka_ha
  fi
fi
"$ROOT/.venv/bin/python" -m pytest --cov=kafka_ha --cov-report=term "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "run-tests: pytest collected no tests" >&2
  rc=1
fi
exit "$rc"
