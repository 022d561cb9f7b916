#!/usr/bin/env bash
# Unavailability after kill -9 of a leader, as a client sees it, with its phases (docs/benchmarks.md).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.failover_bench "$@"
