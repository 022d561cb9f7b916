#!/usr/bin/env bash
# Seeded replication simulation (tests/sim): the real replication code under simulated faults.
#   bin/kafka-replication-sim.sh --seeds 1000          # seeds 0..999; prints failures and seeds per minute
#   bin/kafka-replication-sim.sh --minutes 10 --first 100000
#   bin/kafka-replication-sim.sh --seed 42             # one seed's step-by-step trace
#   bin/kafka-replication-sim.sh --help
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
cd "$KAFKA_HA_ROOT" || exit 1
kafka_ha_exec tests.sim.run "$@"
