#!/usr/bin/env bash
# Replication throttle: a throttled reassignment's rate against the rate set (docs/benchmarks.md).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.throttle_bench "$@"
