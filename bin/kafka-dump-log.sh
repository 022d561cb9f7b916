#!/usr/bin/env bash
# Print log segments, offset indexes and time indexes (Kafka's DumpLogSegments).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.dump_log "$@"
