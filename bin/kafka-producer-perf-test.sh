#!/usr/bin/env bash
# Producer throughput and latency test (Kafka 0.9+ ProducerPerformance).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.producer_perf "$@"
