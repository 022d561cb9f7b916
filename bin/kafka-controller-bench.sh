#!/usr/bin/env bash
# Controller failover and load times against a raw-kazoo floor (see docs/benchmarks.md).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.controller_bench "$@"
