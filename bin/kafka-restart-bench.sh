#!/usr/bin/env bash
# How long a restarted broker takes to serve all its partitions again, and its loop stalls (docs/benchmarks.md).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.restart_bench "$@"
