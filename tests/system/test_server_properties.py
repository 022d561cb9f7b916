"""A Kafka-style server.properties starts a broker through bin/kafka-server-start.sh
(issue 20): a typo is refused with a suggestion before anything starts; without it the
broker registers, and the Kafka keys it does not implement are named once in server.log."""

import signal
import subprocess
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.harness.cluster import wait_until
from tests.harness.ports import free_ports
from tests.harness.zk import shared_ensemble

pytestmark = pytest.mark.system

START = Path(__file__).resolve().parents[2] / "bin" / "kafka-server-start.sh"

PROPERTIES = """\
# Kafka 2.x style broker configuration
broker.id=0
listeners=PLAINTEXT://127.0.0.1:{port}
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs={data}
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
zookeeper.connect={zk}
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
default.replication.factor=1
min.insync.replicas=1
unclean.leader.election.enable=false
delete.topic.enable=true
compression.type=producer
log.cleaner.enable=true
background.threads=10
queued.max.requests=500
replica.lag.time.max.ms=10000
controlled.shutdown.enable=true
log.message.format.version=2.8
inter.broker.protocol.version=2.8
! a multi-line value, as Java properties allow
zookeeper.session.timeout.ms=\\
    6000
"""
IGNORED = ("background.threads, inter.broker.protocol.version, "
           "log.message.format.version, num.io.threads, num.network.threads, queued.max.requests, "
           "socket.receive.buffer.bytes, socket.send.buffer.bytes, transaction.state.log.min.isr, "
           "transaction.state.log.replication.factor")


def test_kafka_server_properties(tmp_path):
    ensemble = shared_ensemble()
    chroot = f"/test-{uuid.uuid4().hex[:12]}"
    root = KazooClient(hosts=ensemble.connect_string, timeout=10)
    root.start(timeout=30)
    try:
        root.ensure_path(chroot)
        text = PROPERTIES.format(port=free_ports(1)[0], data=tmp_path / "data",
                                 zk=ensemble.connect_string + chroot)
        assert text.count("=") - text.count("\n!") >= 30
        config = tmp_path / "server.properties"

        config.write_text(text + "log.retention.hour=24\n")
        refused = subprocess.run([str(START), str(config)], capture_output=True, text=True,
                                 timeout=60)
        assert refused.returncode == 1
        assert ("unknown configuration key 'log.retention.hour' "
                "(did you mean 'log.retention.hours'?)") in refused.stderr
        assert not root.exists(chroot + "/brokers/ids/0")

        config.write_text(text)
        broker = subprocess.Popen([str(START), str(config), "--override", "broker.id=5"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: root.exists(chroot + "/brokers/ids/5") or broker.poll() is not None,
                       timeout=60, message="broker registered")
            assert broker.poll() is None, broker.stderr.read()
            server_log = (tmp_path / "logs" / "server.log").read_text()
            warnings = [line for line in server_log.splitlines() if "not implemented" in line]
            assert warnings == [warnings[0]] and warnings[0].endswith(
                f"so ignored: {IGNORED} (kafka_ha.broker)")
            assert "[Kafka Server 5], started" in server_log
            assert (tmp_path / "logs" / "controller.log").exists()
            assert (tmp_path / "logs" / "state-change.log").exists()

            # SIGHUP re-reads the levels (the override still applies: broker.id stays 5)
            config.write_text(text + "logger.levels=kafka.controller=DEBUG,kafka.network=WARN\n")
            broker.send_signal(signal.SIGHUP)
            wait_until(lambda: "SIGHUP: logger levels now kafka.controller=DEBUG,kafka.network=WARN"
                       in (tmp_path / "logs" / "server.log").read_text(),
                       timeout=30, message="levels re-read on SIGHUP")
            assert broker.poll() is None
        finally:
            broker.send_signal(signal.SIGTERM)
            try:
                broker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                broker.kill()
                broker.wait()
    finally:
        root.delete(chroot, recursive=True)
        root.stop()
        root.close()
