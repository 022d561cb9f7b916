#!/usr/bin/env bash
# Consumer groups: rebalance time against its floor, offset commits per second, and a group's read rate against assign() (docs/benchmarks.md).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.group_bench "$@"
