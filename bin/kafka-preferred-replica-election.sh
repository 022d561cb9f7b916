#!/usr/bin/env bash
# Move leadership back to the preferred replicas (Kafka's PreferredReplicaLeaderElectionCommand).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.admin.preferred_election_command "$@"
