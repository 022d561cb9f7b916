#!/usr/bin/env bash
# List consumer groups, or describe one's members and offsets (Kafka's ConsumerGroupCommand).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.consumer_groups "$@"
