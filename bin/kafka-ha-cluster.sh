#!/usr/bin/env bash
# Local cluster: a ZooKeeper ensemble plus N brokers (see kafka_ha/tools/local_cluster.py).
#   bin/kafka-ha-cluster.sh start|stop|status --dir DIR [--brokers 3] [--zookeepers 3]
#       [--zk-port 2181] [--broker-port 9092] [--zk-session-timeout-ms 6000]
#       [--zk-connect HOST:PORT,...[/chroot]] [--broker-config k=v ...] [--stop-timeout 120]
. "$(dirname "${BASH_SOURCE[0]}")/kafka-run-class.sh"
kafka_ha_exec kafka_ha.tools.local_cluster "$@"
