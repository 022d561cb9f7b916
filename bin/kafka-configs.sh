#!/usr/bin/env bash
# Describe or alter topic config overrides (Kafka's ConfigCommand, --zookeeper era).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.admin.configs_command "$@"
