#!/usr/bin/env bash
# Topic creation: the Admin API (CreateTopics) next to the ZooKeeper script path, topics per second (docs/benchmarks.md).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.topic_admin_bench "$@"
