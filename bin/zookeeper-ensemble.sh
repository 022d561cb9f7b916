#!/usr/bin/env bash
# Local ZooKeeper ensemble on 127.0.0.1 (see kafka_ha/tools/zk_ensemble.py for ports and files).
#   bin/zookeeper-ensemble.sh start|stop|status --dir DIR [--nodes 3] [--zk-port 2181] [--timeout 60]
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.zk_ensemble "$@"
