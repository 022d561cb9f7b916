#!/usr/bin/env bash
# Idempotent producer: acks=all throughput with enable.idempotence on and off, same client, same run (docs/benchmarks.md).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.idempotence_bench "$@"
