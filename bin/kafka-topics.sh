#!/usr/bin/env bash
# Create, delete, describe, or change a topic (Kafka's TopicCommand, --zookeeper era).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.admin.topics_command "$@"
