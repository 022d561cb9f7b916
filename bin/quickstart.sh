#!/usr/bin/env bash
# README command 1: install, start 3 ZooKeeper nodes + 3 brokers, create and describe a topic.
#   bin/quickstart.sh            (state in ${KAFKA_HA_DEMO_DIR:-/tmp/kafka-ha-demo})
#   bin/kafka-ha-cluster.sh stop --dir /tmp/kafka-ha-demo    # to tear it down
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  cat <<'USAGE'
USAGE: bin/quickstart.sh
Install, start 3 ZooKeeper nodes and 3 brokers, create and describe topic demo.
Option                                  Description
------                                  -----------
-h, --help                              Print this usage and exit
Environment: KAFKA_HA_DEMO_DIR (default /tmp/kafka-ha-demo)
USAGE
  exit 0
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
DIR="${KAFKA_HA_DEMO_DIR:-/tmp/kafka-ha-demo}"

bash "$ROOT/bin/install.sh"
started="$(bash "$ROOT/bin/kafka-ha-cluster.sh" start --dir "$DIR")"
echo "$started"
zk="$(sed -n 's/^zookeeper\.connect=//p' <<<"$started")"
topics() { bash "$ROOT/bin/kafka-topics.sh" --zookeeper "$zk" "$@"; }

if topics --list | grep -qx demo; then
  echo "quickstart: topic demo already exists"
else
  # Brokers accept connections a moment before they appear in /brokers/ids, which
  # replication factor 3 needs: retry for a few seconds.
  for attempt in $(seq 1 20); do
    if out="$(topics --create --topic demo --partitions 3 --replication-factor 3 2>&1)"; then
      echo "$out"
      break
    fi
    if [ "$attempt" = 20 ]; then
      echo "$out" >&2
      exit 1
    fi
    sleep 0.5
  done
fi

# The controller elects the leaders asynchronously; wait (up to 30 s) until all have one.
for _ in $(seq 1 60); do
  described="$(topics --describe --topic demo)"
  grep -qE 'Leader: (none|-1)' <<<"$described" || break
  sleep 0.5
done
echo "$described"
echo "quickstart: cluster state in $DIR; stop it with: bin/kafka-ha-cluster.sh stop --dir $DIR"
