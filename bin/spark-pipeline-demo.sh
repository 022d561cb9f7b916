#!/usr/bin/env bash
# The worked Spark pipeline in one command: install, start a local cluster, run
# examples/spark_pipeline.py (events -> Structured Streaming aggregation -> totals
# topic), then read the totals back with the console consumer.
#   bin/spark-pipeline-demo.sh        (cluster state in ${KAFKA_HA_DEMO_DIR:-/tmp/kafka-ha-spark-demo})
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  cat <<'USAGE'
USAGE: bin/spark-pipeline-demo.sh
Install, start a local cluster, run examples/spark_pipeline.py, print the totals.
Option                                  Description
------                                  -----------
-h, --help                              Print this usage and exit
Environment: KAFKA_HA_DEMO_DIR (default /tmp/kafka-ha-spark-demo)
USAGE
  exit 0
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
DIR="${KAFKA_HA_DEMO_DIR:-/tmp/kafka-ha-spark-demo}"
RUN_ID="demo$(date +%s)"
bash "$ROOT/bin/install.sh"
started="$(bash "$ROOT/bin/kafka-ha-cluster.sh" start --dir "$DIR" --zk-port 22181 --broker-port 19092)"
echo "$started"
zk="$(sed -n 's/^zookeeper\.connect=//p' <<<"$started")"
bootstrap="$(sed -n 's/^bootstrap\.servers=//p' <<<"$started")"
"$ROOT/.venv/bin/python" "$ROOT/examples/spark_pipeline.py" --bootstrap-servers "$bootstrap" \
  --zookeeper "$zk" --run-id "$RUN_ID"
echo "--- totals-$RUN_ID, read back with the console consumer:"
bash "$ROOT/bin/kafka-console-consumer.sh" --bootstrap-server "$bootstrap" --topic "totals-$RUN_ID" \
  --from-beginning --timeout-ms 5000 --property print.key=true
echo "spark-pipeline-demo: stop the cluster with: bin/kafka-ha-cluster.sh stop --dir $DIR"
