#!/usr/bin/env bash
# Move partitions between replicas: generate, execute or verify a reassignment (Kafka's ReassignPartitionsCommand).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.admin.reassign_command "$@"
