#!/usr/bin/env bash
# Check that all replicas of the matching topics hold the same data (Kafka's ReplicaVerificationTool).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.replica_verification "$@"
