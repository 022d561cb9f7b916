#!/usr/bin/env bash
# List, describe, reset the offsets of, or delete consumer groups (Kafka's ConsumerGroupCommand).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.consumer_groups "$@"
