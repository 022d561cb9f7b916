#!/usr/bin/env bash
# The API versions each broker supports (Kafka's BrokerApiVersionsCommand).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.broker_api_versions "$@"
