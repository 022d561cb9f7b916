"""Helpers for tests that drive a cluster: the real CLI, znode reads, broker logs."""

import os
import re
import subprocess
import sys
from pathlib import Path

from kazoo.exceptions import NoNodeError

from kafka_ha.zk import znodes as zn

ROOT = Path(__file__).resolve().parents[2]


def run_tool(script, *args, timeout_s=60):
    """Run ``bin/<script>`` with this interpreter: ``(rc, stdout, stderr)``."""
    return finish_tool(start_tool(script, *args), timeout_s)


def start_tool(script, *args):
    """Start ``bin/<script>`` with this interpreter and return at once (a ``Popen``), for
    tools that must run at the same time; ``finish_tool`` collects the result."""
    env = dict(os.environ, KAFKA_HA_PYTHON=sys.executable)
    return subprocess.Popen([str(ROOT / "bin" / script), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, stdin=subprocess.DEVNULL)


def finish_tool(process, timeout_s=60):
    """Wait for a tool from ``start_tool``: ``(rc, stdout, stderr)``; killed after ``timeout_s``."""
    try:
        out, err = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    return process.returncode, out, err


def topics_cli(cluster, *args):
    return run_tool("kafka-topics.sh", "--zookeeper", cluster.connect_string, *args)


def create_topic(cluster, topic, partitions=3, rf=3, *extra):
    if extra and extra[0] == "--replica-assignment":
        rc, out, err = topics_cli(cluster, "--create", "--topic", topic, *extra)
    else:
        rc, out, err = topics_cli(cluster, "--create", "--topic", topic, "--partitions",
                                  partitions, "--replication-factor", rf, *extra)
    assert rc == 0 and f'Created topic "{topic}".' in out, (rc, out, err)
    assignment = read_assignment(cluster, topic)
    cluster.wait_until(lambda: len(read_states(cluster, topic)) == len(assignment.partitions),
                       timeout=30, message=f"state znodes of {topic} not all created")
    return assignment


def read_assignment(cluster, topic):
    path = zn.TopicZNode.path(topic)
    data, stat = cluster.zk.get(path)
    return zn.TopicZNode.decode(data, path, stat.version)


def read_state(cluster, topic, partition):
    path = zn.TopicPartitionStateZNode.path(topic, partition)
    try:
        data, stat = cluster.zk.get(path)
    except NoNodeError:
        return None
    return zn.TopicPartitionStateZNode.decode(data, path, stat.version)


def read_states(cluster, topic):
    """{partition: LeaderAndIsr} for the partitions whose state exists."""
    try:
        parts = cluster.zk.get_children(zn.TopicPartitionsZNode.path(topic))
    except NoNodeError:
        return {}
    states = {}
    for p in sorted(int(x) for x in parts):
        state = read_state(cluster, topic, p)
        if state is not None:
            states[p] = state
    return states


def wait_isr(cluster, topic, isr, partition=0):
    cluster.wait_until(lambda: set(read_states(cluster, topic)[partition].isr) == set(isr),
                       timeout=60, message=f"ISR of {topic} never became {sorted(isr)}")


def verify_replicas(cluster, topic):
    """kafka-replica-verification.sh: every replica of ``topic`` holds the same records."""
    rc, out, err = run_tool("kafka-replica-verification.sh", "--broker-list", cluster.bootstrap_servers,
                            "--topic-white-list", topic, "--time", "-2", "--once", timeout_s=120)
    assert rc == 0, out + err


def controller_epoch(cluster):
    data, stat = cluster.zk.get(zn.CONTROLLER_EPOCH_PATH)
    return int(data), stat


def log_path(cluster, broker, name):
    return Path(cluster.config_path(broker)).parent / "logs" / name


def log_text(cluster, broker, name, since=0):
    path = log_path(cluster, broker, name)
    if not path.exists():
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        f.seek(since)
        return f.read()


def log_size(cluster, broker, name):
    path = log_path(cluster, broker, name)
    return path.stat().st_size if path.exists() else 0


def received_leader_and_isr(text):
    """{(topic, partition): leader_epoch} from a broker's state-change log text."""
    found = {}
    pattern = re.compile(r"received LeaderAndIsr request \(Leader:(-?\d+),ISR:[\d,]*,"
                         r"LeaderEpoch:(\d+),ControllerEpoch:(\d+)\).*for partition \[(.+),(\d+)\]")
    for m in pattern.finditer(text):
        found[(m.group(4), int(m.group(5)))] = int(m.group(2))
    return found
