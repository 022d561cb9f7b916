"""bin/zookeeper-ensemble.sh and the ZooKeeper test harness against real ZooKeeper servers.

The lifecycle test runs its own ensemble on a free port block in a temporary directory,
so it never touches the session's shared ensemble.
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from kafka_ha.tools.zk_ensemble import Ensemble, EnsembleError, four_letter
from tests.harness.cluster import wait_until
from tests.harness.ports import free_port_block
from tests.harness.zk import ensemble_port_offsets, zkcli

pytestmark = pytest.mark.system

SCRIPT = Path(__file__).resolve().parents[2] / "bin" / "zookeeper-ensemble.sh"


def run_script(*args):
    env = dict(os.environ)
    env.setdefault("KAFKA_HA_PYTHON", sys.executable)
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)


def client(port):
    zk = KazooClient(hosts=f"127.0.0.1:{port}", timeout=10)
    zk.start(timeout=30)
    return zk


def read_through(port, path):
    zk = client(port)
    try:
        zk.sync(path)  # a follower may lag the leader; sync makes the read current
        return zk.get(path)[0]
    finally:
        zk.stop()
        zk.close()


def write_through(port, path, data):
    zk = client(port)
    try:
        zk.create(path, data, makepath=True)
    finally:
        zk.stop()
        zk.close()


@pytest.fixture
def ensemble(tmp_path):
    ens = Ensemble(tmp_path / "zk", nodes=3, zk_port=free_port_block(ensemble_port_offsets(3)))
    yield ens
    ens.stop()


def test_script_lifecycle(ensemble):
    ens = ensemble
    started = run_script("start", "--dir", ens.dir, "--nodes", 3, "--zk-port", ens.zk_port)
    assert started.returncode == 0, started.stderr
    assert f"zookeeper.connect={ens.connect_string}" in started.stdout.splitlines()

    status = run_script("status", "--dir", ens.dir)  # size and ports come from ensemble.json
    lines = status.stdout.splitlines()
    assert status.returncode == 0, status.stdout + status.stderr
    assert [line.split()[:2] for line in lines] == [
        [f"zk-{i}", f"127.0.0.1:{ens.client_port(i)}"] for i in ens.ids]
    assert sum(line.endswith(" leader") for line in lines) == 1

    for i in ens.ids:
        write_through(ens.client_port(i), f"/lifecycle/via-{i}", f"v{i}".encode())
    for i in ens.ids:
        assert [read_through(ens.client_port(i), f"/lifecycle/via-{j}") for j in ens.ids] == [
            b"v1", b"v2", b"v3"]

    victim = ens.leader()
    others = [i for i in ens.ids if i != victim]
    pids = {i: ens.node_pid(i) for i in others}
    ens.kill(victim)
    assert ens.node_pid(victim) is None
    wait_until(lambda: ens.status()["serving"], 30, message="quorum of 2 not serving")
    degraded = run_script("status", "--dir", ens.dir)
    assert degraded.returncode == 0, degraded.stdout
    assert f"zk-{victim} 127.0.0.1:{ens.client_port(victim)} not running" in degraded.stdout
    write_through(ens.client_port(others[0]), "/lifecycle/during-outage", b"x")
    assert read_through(ens.client_port(others[1]), "/lifecycle/during-outage") == b"x"

    restarted = run_script("start", "--dir", ens.dir)
    assert restarted.returncode == 0, restarted.stderr
    assert restarted.stdout.count("(already running)") == 2
    assert {i: ens.node_pid(i) for i in others} == pids
    assert ens.node_pid(victim) is not None
    assert read_through(ens.client_port(victim), "/lifecycle/during-outage") == b"x"

    stopped = run_script("stop", "--dir", ens.dir)
    assert stopped.returncode == 0, stopped.stderr
    assert all(ens.node_pid(i) is None for i in ens.ids)
    assert four_letter(ens.client_port(1)) is None
    final = run_script("status", "--dir", ens.dir)
    assert final.returncode == 1
    assert final.stdout.count("not running") == 3


def test_start_refuses_a_busy_port(tmp_path):
    base = free_port_block(ensemble_port_offsets(1))
    ens = Ensemble(tmp_path / "zk", nodes=1, zk_port=base)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", base))
        squatter.listen()
        with pytest.raises(EnsembleError, match=f"port.*{base}.*in use"):
            ens.start(timeout_s=10)
    assert ens.status()["serving"] is False


def test_config_layout():
    three = Ensemble("/tmp/unused", nodes=3, zk_port=3000)
    cfg = three.config_text(2).splitlines()
    assert "clientPort=3001" in cfg and "standaloneEnabled=false" in cfg
    assert [line for line in cfg if line.startswith("server.")] == [
        "server.1=127.0.0.1:3100:3101", "server.2=127.0.0.1:3102:3103",
        "server.3=127.0.0.1:3104:3105"]
    assert {"tickTime=500", "minSessionTimeout=1000", "maxSessionTimeout=30000",
            "4lw.commands.whitelist=*", "admin.enableServer=false", "forceSync=no"} <= set(cfg)
    single = Ensemble("/tmp/unused", nodes=1, zk_port=3000).config_text(1)
    assert "server." not in single and "standaloneEnabled" not in single


def test_zkcli_reads_a_node_in_a_chroot(zk_ensemble):
    chroot = f"/zkcli-{os.getpid()}"
    zk = KazooClient(hosts=zk_ensemble.connect_string, timeout=10)
    zk.start(timeout=30)
    try:
        zk.create(f"{chroot}/brokers/ids/1", b'{"host":"h1","port":9092}', makepath=True)
        zk.create(f"{chroot}/brokers/ids/2", b"{}")
        connect = zk_ensemble.connect_string.split(",")[1] + chroot
        rc, out, err = zkcli(connect, "get", "/brokers/ids/1")
        assert (rc, out) == (0, '{"host":"h1","port":9092}\n'), err
        rc, out, _ = zkcli(connect, "ls", "/brokers/ids")
        assert rc == 0 and sorted(out.strip().strip("[]").split(", ")) == ["1", "2"]
        rc, out, err = zkcli(connect, "get", "/brokers/ids/3")
        assert rc == 1 and "Node does not exist: /brokers/ids/3" in err
    finally:
        zk.stop()
        zk.close()
