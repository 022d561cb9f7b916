#!/usr/bin/env bash
# End-to-end latency, one message at a time (Kafka 2.x EndToEndLatency).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.e2e_latency "$@"
