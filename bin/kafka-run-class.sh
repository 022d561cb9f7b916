#!/usr/bin/env bash
# Shared launcher for the bin/ scripts: every script is a thin wrapper over a Python module.
#
#   bin/kafka-run-class.sh <python.module> [args...]     # exec "$PY" -m <module> args...
#   . "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"  # from another bin/ script; then
#   kafka_ha_exec <python.module> [args...]                #   or use "$KAFKA_HA_PY" / "$KAFKA_HA_ROOT"
#
# The Python is $KAFKA_HA_PYTHON, else <root>/.venv/bin/python (made by bin/install.sh),
# else python3.  The repository root is put first on PYTHONPATH, so the scripts work from a
# checkout even without `pip install -e`.

KAFKA_HA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
if [ -n "${KAFKA_HA_PYTHON:-}" ]; then
  KAFKA_HA_PY="$KAFKA_HA_PYTHON"
elif [ -x "$KAFKA_HA_ROOT/.venv/bin/python" ]; then
  KAFKA_HA_PY="$KAFKA_HA_ROOT/.venv/bin/python"
else
  KAFKA_HA_PY=python3
fi
PYTHONPATH="$KAFKA_HA_ROOT${PYTHONPATH:+:$PYTHONPATH}"
export KAFKA_HA_ROOT KAFKA_HA_PY PYTHONPATH

kafka_ha_exec() {
  exec "$KAFKA_HA_PY" -m "$@"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
    cat <<'USAGE'
USAGE: bin/kafka-run-class.sh <python.module> [args...]
Option                                  Description
------                                  -----------
<python.module>                         The module to run (python -m), e.g.
                                          kafka_ha.tools.console_producer
[args...]                               Its arguments
-h, --help                              Print this usage and exit
USAGE
    exit 0
  fi
  if [ $# -lt 1 ]; then
    echo "USAGE: $0 <python.module> [args...]" >&2
    exit 1
  fi
  kafka_ha_exec "$@"
fi
