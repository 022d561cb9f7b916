#!/usr/bin/env bash
# Provisions one VM of the Vagrant cluster (vagrant/Vagrantfile); run as root:
#   provision.sh zookeeper MYID ZK_HOSTS        e.g. zookeeper 2 192.168.50.11,192.168.50.12,192.168.50.13
#   provision.sh broker BROKER_ID HOST ZK_HOSTS e.g. broker 1 192.168.50.51 192.168.50.11,...
#
# ZooKeeper is Debian's own (package zookeeperd: systemd unit "zookeeper", config in
# /etc/zookeeper/conf), so an operator manages it as on any Debian host.  A broker runs from
# /opt/kafka-ha, a copy of the synced source tree with its own virtualenv (bin/install.sh),
# as the systemd unit kafka-ha, with its config in /etc/kafka-ha/server.yaml.
#
# KAFKA_HA_PROVISION_ROOT=DIR writes the config files under DIR and stops there (no apt,
# no copy, no systemctl): tests/system/test_vagrant_provision.py renders a cluster's files
# this way on 127.0.x.y addresses and starts them as plain processes.  ZK_CLIENT_PORT,
# ZK_QUORUM_PORT, ZK_ELECTION_PORT and BROKER_PORT override Kafka's usual ports for that.
set -euo pipefail

ROOT="${KAFKA_HA_PROVISION_ROOT:-}"
SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
INSTALL_DIR=/opt/kafka-ha
ZK_CLIENT_PORT="${ZK_CLIENT_PORT:-2181}"
ZK_QUORUM_PORT="${ZK_QUORUM_PORT:-2888}"
ZK_ELECTION_PORT="${ZK_ELECTION_PORT:-3888}"
BROKER_PORT="${BROKER_PORT:-9092}"

usage() {
  echo "usage: provision.sh zookeeper MYID ZK_HOSTS | broker BROKER_ID HOST ZK_HOSTS" >&2
  exit 1
}
render_only() { [ -n "$ROOT" ]; }

# a,b,c -> a:2181,b:2181,c:2181
zk_connect() { echo "$1" | sed "s/\([^,][^,]*\)/\1:$ZK_CLIENT_PORT/g"; }

write_zookeeper_config() {  # MYID ZK_HOSTS
  local myid=$1 hosts=$2 conf="$ROOT/etc/zookeeper/conf" data="$ROOT/var/lib/zookeeper" i=1 me=""
  mkdir -p "$conf" "$data"
  for h in ${hosts//,/ }; do
    if [ "$i" = "$myid" ]; then me=$h; fi
    i=$((i + 1))
  done
  if [ -z "$me" ]; then
    echo "provision: myid $myid is not a position in $hosts" >&2
    exit 1
  fi
  {
    echo "# Written by kafka-ha's vagrant/provision.sh for server $myid of $hosts"
    echo "tickTime=2000"
    echo "initLimit=10"
    echo "syncLimit=5"
    echo "dataDir=$data"
    echo "clientPort=$ZK_CLIENT_PORT"
    echo "clientPortAddress=$me"
    # What kafka-ha's tools and an operator's zkCli/four-letter checks use.
    echo "4lw.commands.whitelist=srvr,stat,ruok,mntr,cons,wchs"
    echo "admin.enableServer=false"
    # Snapshots and transaction logs grow without bound unless purged.
    echo "autopurge.snapRetainCount=3"
    echo "autopurge.purgeInterval=24"
    i=1
    for h in ${hosts//,/ }; do
      echo "server.$i=$h:$ZK_QUORUM_PORT:$ZK_ELECTION_PORT"
      i=$((i + 1))
    done
  } >"$conf/zoo.cfg"
  # ZooKeeper reads dataDir/myid; Debian keeps a copy beside zoo.cfg for operators.
  echo "$myid" >"$data/myid"
  echo "$myid" >"$conf/myid"
}

write_broker_config() {  # BROKER_ID HOST ZK_HOSTS REPLICATION
  local id=$1 host=$2 hosts=$3 replication=$4 conf="$ROOT/etc/kafka-ha" logs="$ROOT/var/lib/kafka-ha/logs"
  mkdir -p "$conf" "$logs"
  # conf/server.yaml documents every key; what is not set here takes its default.
  cat >"$conf/server.yaml" <<YAML
# Written by kafka-ha's vagrant/provision.sh for broker $id
broker.id: $id
host.name: $host
port: $BROKER_PORT
zookeeper.connect: "$(zk_connect "$hosts")"
zookeeper.session.timeout.ms: 6000
log.dirs: $logs
num.partitions: 3
default.replication.factor: $replication
min.insync.replicas: $(( replication > 2 ? 2 : 1 ))
unclean.leader.election.enable: false
controlled.shutdown.enable: true
delete.topic.enable: true
YAML
}

install_kafka_ha() {
  # A copy, not the synced folder: each VM builds its own virtualenv.
  mkdir -p "$INSTALL_DIR"
  tar -C "$SRC" --exclude=./.venv --exclude=./.git -cf - . | tar -C "$INSTALL_DIR" -xf -
  # The VMs run brokers and ZooKeeper, not the tests: no Prometheus server on each of them.
  KAFKA_HA_WITH_PROMETHEUS=0 "$INSTALL_DIR/bin/install.sh"
}

provision_zookeeper() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends zookeeperd default-jre-headless
  write_zookeeper_config "$@"
  systemctl enable zookeeper
  systemctl restart zookeeper
}

provision_broker() {
  install_kafka_ha
  id -u kafka-ha >/dev/null 2>&1 || useradd --system --home-dir /var/lib/kafka-ha --shell /usr/sbin/nologin kafka-ha
  write_broker_config "$@"
  chown -R kafka-ha: /var/lib/kafka-ha
  install -m 0644 "$SRC/vagrant/kafka-ha.service" /etc/systemd/system/kafka-ha.service
  systemctl daemon-reload
  systemctl enable kafka-ha
  systemctl restart kafka-ha
}

role="${1:-}"
case "$role" in
  zookeeper)
    [ $# -eq 3 ] || usage
    if render_only; then write_zookeeper_config "$2" "$3"; else apt-get update -q >/dev/null; provision_zookeeper "$2" "$3"; fi
    ;;
  broker)
    [ $# -eq 4 ] || usage
    n=$(echo "$4" | tr ',' '\n' | grep -c .)
    replication=$(( ${NUM_BROKERS:-3} < 3 ? ${NUM_BROKERS:-3} : 3 ))
    if render_only; then write_broker_config "$2" "$3" "$4" "$replication"; else provision_broker "$2" "$3" "$4" "$replication"; fi
    echo "provision: broker $2 at $3:$BROKER_PORT, ZooKeeper $n node(s)"
    ;;
  *)
    usage
    ;;
esac
