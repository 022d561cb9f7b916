#!/usr/bin/env bash
# Stop brokers with SIGTERM (controlled shutdown): bin/kafka-server-stop.sh [CONFIG]
# Without CONFIG every kafka_ha.broker.main process of this machine is signalled;
# with CONFIG only the broker started with that config file.  Exit 1 if none was found.
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  cat <<'USAGE'
USAGE: bin/kafka-server-stop.sh [server.properties|server.yaml]
Option                                  Description
------                                  -----------
<config>                                Stop only the broker started with this file
-h, --help                              Print this usage and exit
USAGE
  exit 0
fi
if [ $# -gt 1 ]; then
  echo "USAGE: $0 [server.yaml]" >&2
  exit 1
fi
want=""
[ $# -eq 1 ] && want="$(realpath -m -- "$1")"

pids=()
for dir in /proc/[0-9]*; do
  pid="${dir#/proc/}"
  [ "$pid" = "$$" ] && continue
  mapfile -d '' -t argv 2>/dev/null <"$dir/cmdline" || continue
  for ((k = 0; k + 1 < ${#argv[@]}; k++)); do
    [ "${argv[k]}" = "-m" ] && [ "${argv[k+1]}" = "kafka_ha.broker.main" ] || continue
    if [ -n "$want" ]; then
      conf="${argv[k+2]:-}"
      [ "${conf:0:1}" = "/" ] || conf="$(readlink "$dir/cwd" 2>/dev/null)/$conf"
      [ "$(realpath -m -- "$conf")" = "$want" ] || continue
    fi
    pids+=("$pid")
    break
  done
done

if [ ${#pids[@]} -eq 0 ]; then
  echo "No kafka_ha broker to stop${want:+ for $want}" >&2
  exit 1
fi
kill -TERM "${pids[@]}"
echo "Sent SIGTERM to broker pid(s) ${pids[*]}"
