#!/usr/bin/env bash
# Print the messages of a topic to standard output (Kafka's ConsoleConsumer).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.console_consumer "$@"
