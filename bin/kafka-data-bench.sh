#!/usr/bin/env bash
# Produce / consume / end-to-end latency benchmark against a socket baseline (docs/benchmarks.md).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.data_bench "$@"
