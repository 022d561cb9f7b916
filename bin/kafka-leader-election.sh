#!/usr/bin/env bash
# Elect preferred leaders through the controller's ElectLeaders API (Kafka 2.4's LeaderElectionCommand).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.admin.leader_election_command "$@"
