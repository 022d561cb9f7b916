"""The Vagrant cluster's configuration (vagrant/provision.sh), started as plain processes.

Vagrant and a hypervisor are not on the test machines, so the VMs are played by loopback
addresses: ZooKeeper servers on 127.0.1.1-3 and brokers on 127.0.2.1-3, each with a
directory of its own standing in for its VM's filesystem.  provision.sh renders each
node's files exactly as it does in a VM (KAFKA_HA_PROVISION_ROOT), only with free ports
instead of 2181/2888/3888/9092; ZooKeeper then runs with those files as Debian's service
runs it, and each broker with ``bin/kafka-server-start.sh`` as the systemd unit does.  What
this shows: the rendered ensemble forms a quorum across distinct addresses, the brokers
register under their own addresses and replicate a topic with acks=all.  What it cannot
show: the Vagrantfile itself, apt, systemd.
"""

import os
import signal
import subprocess
from types import SimpleNamespace

import pytest
import yaml
from kazoo.client import KazooClient

from kafka_ha.client.producer import Producer
from kafka_ha.tools.processes import spawn
from kafka_ha.tools.zk_ensemble import LOG4J_TEMPLATE, four_letter, server_command
from kafka_ha.zk import znodes as zn
from tests.harness.cluster import wait_until
from tests.harness.kafka import ROOT, run_tool
from tests.harness.load import read_partitions
from tests.harness.ports import free_ports

pytestmark = pytest.mark.system
PROVISION = ROOT / "vagrant" / "provision.sh"
ZK_HOSTS = ["127.0.1.1", "127.0.1.2", "127.0.1.3"]
BROKER_HOSTS = ["127.0.2.1", "127.0.2.2", "127.0.2.3"]


def provision(vm_root, ports, *args):
    env = dict(os.environ, KAFKA_HA_PROVISION_ROOT=str(vm_root), **ports)
    done = subprocess.run([str(PROVISION), *args], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def start_zookeeper(vm_root):
    """QuorumPeerMain on the rendered zoo.cfg, as Debian's zookeeper service starts it."""
    (vm_root / "log").mkdir()
    command = server_command(vm_root / "etc" / "zookeeper" / "conf" / "zoo.cfg", vm_root / "log", LOG4J_TEMPLATE)
    return spawn(command, vm_root / "zookeeper.out", die_with_parent=True)


@pytest.fixture
def vms(tmp_path):
    """Where the VMs' files go (``tmp``), the ports provision.sh renders (``ports``, and
    ``client_port`` and ``broker_port`` of them), and the processes started (``started``,
    killed at the end)."""
    client, quorum, election, broker = free_ports(4)
    ports = {"ZK_CLIENT_PORT": str(client), "ZK_QUORUM_PORT": str(quorum),
             "ZK_ELECTION_PORT": str(election), "BROKER_PORT": str(broker)}
    started = []
    yield SimpleNamespace(tmp=tmp_path, ports=ports, started=started, client_port=client, broker_port=broker)
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def test_rendered_vm_configs_form_a_replicating_cluster(vms):
    zk_hosts = ",".join(ZK_HOSTS)
    for myid, host in enumerate(ZK_HOSTS, start=1):
        vm_root = vms.tmp / f"zk{myid}"
        provision(vm_root, vms.ports, "zookeeper", str(myid), zk_hosts)
        assert f"clientPortAddress={host}" in (vm_root / "etc/zookeeper/conf/zoo.cfg").read_text()
        vms.started.append(start_zookeeper(vm_root))
    modes = wait_until(lambda: all(four_letter(vms.client_port, host=h) for h in ZK_HOSTS)
                       and sorted(mode_of(four_letter(vms.client_port, host=h)) for h in ZK_HOSTS),
                       timeout=90, message="the rendered ensemble did not form a quorum")
    assert modes == ["follower", "follower", "leader"], modes

    configs = []
    for broker_id, host in enumerate(BROKER_HOSTS, start=1):
        vm_root = vms.tmp / f"broker{broker_id}"
        provision(vm_root, vms.ports, "broker", str(broker_id), host, zk_hosts)
        config_path = vm_root / "etc" / "kafka-ha" / "server.yaml"
        configs.append(yaml.safe_load(config_path.read_text()))
        vms.started.append(spawn([str(ROOT / "bin" / "kafka-server-start.sh"), str(config_path)],
                                 vm_root / "server.out", die_with_parent=True))
    connect = configs[0]["zookeeper.connect"]
    assert connect == ",".join(f"{h}:{vms.client_port}" for h in ZK_HOSTS)
    assert (configs[0]["default.replication.factor"], configs[0]["min.insync.replicas"]) == (3, 2)

    zk = KazooClient(hosts=connect)
    zk.start(timeout=30)
    try:
        registered = wait_until(lambda: len(zk.get_children(zn.BROKER_IDS_PATH)) == 3
                                and {b: zn.BrokerIdZNode.decode(zk.get(zn.BrokerIdZNode.path(b))[0], zn.BrokerIdZNode.path(b))
                                     for b in (1, 2, 3)}, timeout=60, message="the brokers did not register")
        assert {b: (i.host, i.port) for b, i in registered.items()} == {
            b: (BROKER_HOSTS[b - 1], vms.broker_port) for b in (1, 2, 3)}
        rc, out, err = run_tool("kafka-topics.sh", "--zookeeper", connect, "--create", "--topic", "vagrant",
                                "--partitions", "3", "--replication-factor", "3")
        assert rc == 0, out + err
        wait_until(lambda: all(len(isr_of(zk, p)) == 3 for p in range(3)), timeout=60,
                   message="the topic's partitions did not come online with full ISRs")
    finally:
        zk.stop()
        zk.close()

    cluster = SimpleNamespace(bootstrap_servers=",".join(f"{h}:{vms.broker_port}" for h in BROKER_HOSTS))
    values = [b"vm-%d" % i for i in range(30)]
    producer = Producer(cluster.bootstrap_servers, acks=-1, retries=5)
    futures = [producer.send("vagrant", v, partition=i % 3) for i, v in enumerate(values)]
    producer.flush()
    for f in futures:
        f.get(timeout=30)
    producer.close()
    assert sorted(r.value for r in read_partitions(cluster, "vagrant", 3)) == sorted(values)


def mode_of(srvr_text):
    return next(line.split(":", 1)[1].strip() for line in srvr_text.splitlines() if line.startswith("Mode:"))


def isr_of(zk, partition):
    path = zn.TopicPartitionStateZNode.path("vagrant", partition)
    return zn.TopicPartitionStateZNode.decode(zk.get(path)[0], path).isr
