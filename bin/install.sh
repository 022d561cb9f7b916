#!/usr/bin/env bash
# Idempotent, non-interactive setup for Debian 12 (run as root when packages are missing):
#   1. ZooKeeper 3.8 and a JRE from Debian (zookeeper, default-jre-headless) if absent,
#      and Debian's prometheus (the metrics system test runs its binary) if absent, unless
#      KAFKA_HA_WITH_PROMETHEUS=0;
#   2. <root>/.venv (python3 -m venv; python3-venv from Debian if the module is missing);
#   3. pip install -e "<root>[test,spark]" into it, skipped while the project imports and
#      setup.cfg/pyproject.toml are unchanged (their hash is kept in .venv/.kafka-ha-stamp);
#   4. <site-packages>/kafka_ha_spark_plugin.pth naming <root>/spark_plugin, so that Spark
#      finds pyspark_kafka_ha and registers format("kafka_ha") by itself (see docs/spark.md).
# One line per step on stdout; the output of apt-get/pip is shown only when they fail.
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  cat <<'USAGE'
USAGE: bin/install.sh
Install ZooKeeper, a JRE and the project's virtualenv (idempotent).
Option                                  Description
------                                  -----------
-h, --help                              Print this usage and exit
USAGE
  exit 0
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
VENV="$ROOT/.venv"
STAMP="$VENV/.kafka-ha-stamp"
ZK_JAR=/usr/share/java/zookeeper.jar
LOG="$(mktemp "${TMPDIR:-/tmp}/kafka-ha-install.XXXXXX")"
trap 'rm -f "$LOG"' EXIT
apt_updated=0

step() { echo "install: $*"; }
quietly() {  # run a command, showing its output only if it fails
  if ! "$@" >"$LOG" 2>&1; then
    cat "$LOG" >&2
    echo "install: failed: $*" >&2
    exit 1
  fi
}
apt_install() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "install: need root to apt-get install $* (or install them yourself)" >&2
    exit 1
  fi
  if [ "$apt_updated" = 0 ]; then
    step "apt-get update"
    quietly apt-get update -q
    apt_updated=1
  fi
  step "apt-get install $*"
  quietly env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}

# Two installs at once (e.g. parallel CI steps) must not build one venv concurrently.
if command -v flock >/dev/null 2>&1; then
  exec 9>"${TMPDIR:-/tmp}/kafka-ha-install-$(printf %s "$ROOT" | cksum | cut -d' ' -f1).lock"
  flock 9
fi

if [ -f "$ZK_JAR" ] && command -v java >/dev/null 2>&1; then
  step "zookeeper and java present"
else
  apt_install zookeeper default-jre-headless
fi

# A real Prometheus server for the metrics system test (tests/system/test_metrics.py
# starts the binary itself; the Debian service is not used).  Broker hosts do not need
# it: KAFKA_HA_WITH_PROMETHEUS=0 skips it (vagrant/provision.sh does).
if [ "${KAFKA_HA_WITH_PROMETHEUS:-1}" = 0 ]; then
  step "prometheus not wanted (KAFKA_HA_WITH_PROMETHEUS=0)"
elif command -v prometheus >/dev/null 2>&1; then
  step "prometheus present"
else
  apt_install prometheus
fi

if ! command -v python3 >/dev/null 2>&1; then
  apt_install python3 python3-venv
fi
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "install: python3 >= 3.11 required, found $(python3 --version 2>&1)" >&2
  exit 1
fi

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
  step "virtualenv $VENV present"
else
  rm -rf "$VENV"
  step "python3 -m venv $VENV"
  if ! python3 -m venv "$VENV" >"$LOG" 2>&1; then
    rm -rf "$VENV"  # Debian ships ensurepip separately, in python3-venv
    apt_install python3-venv
    quietly python3 -m venv "$VENV"
  fi
fi

# The checkout's path is part of the stamp: the editable install points at one checkout, and
# a virtualenv shared by two (a symlinked .venv in a git worktree) must be repointed.
want="$( (cat "$ROOT/setup.cfg" "$ROOT/pyproject.toml" 2>/dev/null; echo "$ROOT") | sha256sum | cut -d' ' -f1)"
have="$(cat "$STAMP" 2>/dev/null || true)"
if [ "$want" = "$have" ] && (cd / && "$VENV/bin/python" -c \
    'import kafka_ha, kazoo, gevent, ujson, yaml, crc32c, prometheus_client, pytest, xdist, jsonschema, kafka, confluent_kafka, aiokafka, pyspark, pyarrow') >/dev/null 2>&1; then
  step "kafka-ha already installed in $VENV (setup.cfg unchanged)"
else
  step "pip install -e $ROOT[test,spark]"
  quietly "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT[test,spark]"
  echo "$want" >"$STAMP"
fi
# Spark's data-source lookup lists top-level modules with pkgutil, which does not see the
# modules of setuptools' editable finder: a path entry makes pyspark_kafka_ha a real file.
site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
if [ "$(cat "$site/kafka_ha_spark_plugin.pth" 2>/dev/null || true)" = "$ROOT/spark_plugin" ]; then
  step "spark plugin path present"
else
  step "spark plugin path $site/kafka_ha_spark_plugin.pth -> $ROOT/spark_plugin"
  echo "$ROOT/spark_plugin" >"$site/kafka_ha_spark_plugin.pth"
fi
step "done; python is $VENV/bin/python"
