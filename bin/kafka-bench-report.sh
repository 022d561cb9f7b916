#!/usr/bin/env bash
# docs/benchmarks.md and docs/img/bench-*.svg from bench-results/*.json (--check: are they up to date?).
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.bench_report "$@"
