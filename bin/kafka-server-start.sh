#!/usr/bin/env bash
# Start one broker: bin/kafka-server-start.sh [-daemon] CONFIG [--override key=value]...
#   CONFIG: server.properties (Java properties) or server.yaml
#   foreground: exec python -m kafka_ha.broker.main CONFIG [--override ...]
#   -daemon:    detach (new session, immune to SIGHUP), append stdout/stderr to
#               $LOG_DIR/server.out (default: the config's directory), print the pid.
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"

for arg in "$@"; do
  if [ "$arg" = "--help" ] || [ "$arg" = "-h" ]; then
    kafka_ha_exec kafka_ha.broker.main --help
  fi
done
daemon=0
if [ "${1:-}" = "-daemon" ]; then
  daemon=1
  shift
fi
if [ $# -lt 1 ]; then
  echo "USAGE: $0 [-daemon] server.properties|server.yaml [--override property=value]*" >&2
  exit 1
fi
if [ ! -f "$1" ]; then
  echo "$0: config file $1 not found" >&2
  exit 1
fi
# Absolute path: it identifies the process for kafka-server-stop.sh and the cluster tool.
config="$(cd "$(dirname "$1")" && pwd -P)/$(basename "$1")"
shift

if [ "$daemon" = 0 ]; then
  kafka_ha_exec kafka_ha.broker.main "$config" "$@"
fi

log_dir="${LOG_DIR:-$(dirname "$config")}"
mkdir -p "$log_dir"
# Without job control the background child is no process-group leader, so setsid and nohup
# both exec in place and $! is the broker's own pid.
setsid nohup "$KAFKA_HA_PY" -m kafka_ha.broker.main "$config" "$@" \
  >>"$log_dir/server.out" 2>&1 </dev/null &
echo $!
