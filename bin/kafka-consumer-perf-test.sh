#!/usr/bin/env bash
# Consumer throughput test (Kafka 2.x ConsumerPerformance).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.consumer_perf "$@"
