#!/usr/bin/env bash
# Read lines from standard input and publish them to a topic (Kafka's ConsoleProducer).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.console_producer "$@"
