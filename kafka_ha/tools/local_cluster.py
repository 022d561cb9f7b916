"""Run a local cluster: a ZooKeeper ensemble plus N broker processes on 127.0.0.1.

The ensemble is a :class:`~kafka_ha.tools.zk_ensemble.Ensemble` under the same
directory, or any external ZooKeeper (``zk_connect=``, e.g. a chroot of a shared test
ensemble).  Brokers are real processes started through ``bin/kafka-server-start.sh``.

Files under ``DIR``: ``zk-<i>/`` (ensemble), ``broker-<i>/server.yaml`` (config),
``broker-<i>/server.out`` (stdout/stderr), ``broker-<i>/data/`` (``log.dirs``),
``broker-<i>.pid`` and ``cluster.json`` (the options of the last ``start``, so that
``stop``/``status`` need only ``--dir``).
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from kafka_ha.tools.processes import (HOST, owned_alive, pid_alive, pid_cmdline, port_free,
                                      port_open, read_pid, spawn, tail, terminate)
from kafka_ha.tools.zk_ensemble import Ensemble, EnsembleError, format_node

ROOT = Path(__file__).resolve().parents[2]
START_SCRIPT = ROOT / "bin" / "kafka-server-start.sh"

# Every key of conf/server.yaml except the per-broker ones (id, port, paths, ZooKeeper).
DEFAULT_BROKER_CONFIG = {
    "num.partitions": 1,
    "default.replication.factor": 1,
    "unclean.leader.election.enable": False,
    "min.insync.replicas": 1,
    "auto.leader.rebalance.enable": True,
    "controlled.shutdown.enable": True,
    "delete.topic.enable": True,
    "replica.lag.time.max.ms": 10000,
}


class ClusterError(RuntimeError):
    """A broker could not be started or stopped."""


def parse_value(text):
    """Type a ``--broker-config`` value: ints, floats and booleans; anything else stays text.

    >>> [parse_value(v) for v in ("3", "-1", "0.5", "true", "False", "010", "a,b", "")]
    [3, -1, 0.5, True, False, 10, 'a,b', '']
    """
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    if re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?", text):
        return float(text)
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def parse_overrides(items):
    """``["k=v", ...]`` to a typed dict.

    >>> parse_overrides(["min.insync.replicas=2", "unclean.leader.election.enable=true"])
    {'min.insync.replicas': 2, 'unclean.leader.election.enable': True}
    """
    overrides = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--broker-config expects key=value, got {item!r}")
        overrides[key.strip()] = parse_value(value.strip())
    return overrides


class LocalCluster:
    """``brokers`` brokers (ids 1..N, ports ``broker_port + i - 1``) on one ZooKeeper.

    Without ``zk_connect`` a ``zookeepers``-node ensemble on ``zk_port`` is started under
    ``dir``; with it, that connect string (chroot allowed) is used as is.
    ``broker_ports`` overrides the port of each broker; ``die_with_parent`` runs the brokers
    in the foreground as children that the kernel kills when this process dies (tests).

    >>> c = LocalCluster("/tmp/kh", brokers=2, zk_connect="127.0.0.1:2181/t",
    ...                  overrides={"min.insync.replicas": 2})
    >>> c.bootstrap_servers
    '127.0.0.1:9092,127.0.0.1:9093'
    >>> cfg = c.broker_config(2)
    >>> cfg["broker.id"], cfg["port"], cfg["zookeeper.connect"], cfg["min.insync.replicas"]
    (2, 9093, '127.0.0.1:2181/t', 2)
    >>> cfg["log.dirs"], cfg["unclean.leader.election.enable"]
    ('/tmp/kh/broker-2/data', False)
    >>> c.broker_overrides[2] = {"zookeeper.session.timeout.ms": 30000}
    >>> [c.broker_config(i)["zookeeper.session.timeout.ms"] for i in (1, 2)]
    [6000, 30000]
    """

    def __init__(self, dir, brokers=3, zookeepers=3, zk_port=2181, broker_port=9092,
                 overrides=None, *, zk_connect=None, zk_session_timeout_ms=6000,
                 broker_ports=None, die_with_parent=False, start_timeout_s=60.0):
        self.dir = Path(dir).resolve()
        self.brokers = brokers
        self.overrides = dict(overrides or {})
        self.broker_overrides = {}   # {broker id: {key: value}}, over ``overrides``
        self.zk_session_timeout_ms = zk_session_timeout_ms
        self.broker_ports = list(broker_ports or range(broker_port, broker_port + brokers))
        if len(self.broker_ports) != brokers:
            raise ValueError("broker_ports needs one port per broker")
        self.die_with_parent = die_with_parent
        self.start_timeout_s = start_timeout_s
        self.ensemble = None if zk_connect else Ensemble(
            self.dir, nodes=zookeepers, zk_port=zk_port, die_with_parent=die_with_parent)
        self._zk_connect = zk_connect
        self._procs = {}  # Popen objects of foreground brokers (die_with_parent mode)

    @property
    def broker_ids(self):
        return range(1, self.brokers + 1)

    def port(self, i):
        return self.broker_ports[i - 1]

    @property
    def connect_string(self):
        return self._zk_connect or self.ensemble.connect_string

    @property
    def bootstrap_servers(self):
        return self.bootstrap_of(self.broker_ids)

    def bootstrap_of(self, ids):
        """The bootstrap list of brokers ``ids`` only."""
        return ",".join(f"{HOST}:{self.port(i)}" for i in ids)

    def broker_dir(self, i):
        return self.dir / f"broker-{i}"

    def config_path(self, i):
        return self.broker_dir(i) / "server.yaml"

    def out_path(self, i):
        return self.broker_dir(i) / "server.out"

    def pid_path(self, i):
        return self.dir / f"broker-{i}.pid"

    def broker_config(self, i):
        """The typed config of broker ``i`` (defaults, the overrides, then its own)."""
        config = {
            "broker.id": i,
            "port": self.port(i),
            "host.name": HOST,
            "zookeeper.connect": self.connect_string,
            "zookeeper.session.timeout.ms": self.zk_session_timeout_ms,
            "log.dirs": str(self.broker_dir(i) / "data"),
            **DEFAULT_BROKER_CONFIG,
        }
        config.update(self.overrides)
        config.update(self.broker_overrides.get(i, {}))
        return config

    def write_config(self, i):
        path = self.config_path(i)
        (self.broker_dir(i) / "data").mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(self.broker_config(i), default_flow_style=False, sort_keys=False)
        path.write_text("# generated by kafka_ha.tools.local_cluster\n" + text)
        return path

    # broker processes
    def broker_pid(self, i):
        """The pid of broker ``i`` if its process is alive (stale pid files give None)."""
        pid = read_pid(self.pid_path(i))
        if owned_alive(self._procs.get(i), pid) or (
                pid_alive(pid) and str(self.config_path(i)) in pid_cmdline(pid)):
            return pid
        return None

    def broker_alive(self, i):
        return self.broker_pid(i) is not None

    def broker_exit_status(self, i):
        """The exit status of broker ``i`` once its foreground process (``die_with_parent``)
        has ended; None while it runs, or if this object did not start it."""
        proc = self._procs.get(i)
        return None if proc is None else proc.poll()

    def start_broker(self, i, wait=True):
        """Start broker ``i`` unless it runs; with ``wait``, until its port accepts."""
        pid = self.broker_pid(i)
        if pid:
            return pid
        if not port_free(self.port(i)):
            raise ClusterError(f"broker {i}: port {self.port(i)} is in use by another process")
        self.write_config(i)
        pid = self._launch(i)
        self.pid_path(i).write_text(f"{pid}\n")
        if wait:
            self.wait_for_broker(i)
        return pid

    def _launch(self, i):
        env = dict(os.environ)
        env.setdefault("KAFKA_HA_PYTHON", sys.executable)
        env.pop("LOG_DIR", None)
        config = str(self.config_path(i))
        if self.die_with_parent:
            proc = spawn(["bash", str(START_SCRIPT), config], self.out_path(i), env=env,
                         die_with_parent=True)
            self._procs[i] = proc
            return proc.pid
        done = subprocess.run(["bash", str(START_SCRIPT), "-daemon", config], env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True)
        lines = done.stdout.split()
        if done.returncode != 0 or not lines or not lines[-1].isdigit():
            raise ClusterError(f"broker {i}: {START_SCRIPT} failed: {done.stdout}{done.stderr}")
        return int(lines[-1])

    def wait_for_broker(self, i, timeout_s=None):
        """Wait until broker ``i`` accepts TCP connections; fail fast if it exits."""
        timeout_s = self.start_timeout_s if timeout_s is None else timeout_s
        pid = read_pid(self.pid_path(i))
        deadline = time.monotonic() + timeout_s
        while not port_open(self.port(i)):
            if not pid_alive(pid):
                raise ClusterError(
                    self._failure(f"broker {i} (pid {pid}) exited during startup", i))
            if time.monotonic() >= deadline:
                raise ClusterError(self._failure(
                    f"broker {i} (pid {pid}) not listening on {HOST}:{self.port(i)} "
                    f"after {timeout_s}s", i))
            time.sleep(0.1)

    def _failure(self, headline, i):
        return f"{headline}\n--- tail of {self.out_path(i)} ---\n{tail(self.out_path(i))}"

    def kill_broker(self, i, sig=signal.SIGKILL, wait=True):
        """Send ``sig`` to broker ``i``; for KILL/TERM/INT wait (up to 30 s) until it is gone."""
        pid = self.broker_pid(i)
        if pid is None:
            return None
        os.kill(pid, sig)
        if wait and sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
            # Wait on broker_pid, not on the pid alone: right after the signal the
            # process can look gone to one check and alive to the other (seen in
            # tests: a start_broker right after "dead" found the old one running).
            deadline = time.monotonic() + 30.0
            while self.broker_pid(i) is not None:
                if time.monotonic() > deadline:
                    raise ClusterError(f"broker {i} (pid {pid}) still alive after signal {sig}")
                time.sleep(0.05)
        return pid

    def stop_broker(self, i, timeout_s=10.0):
        """SIGTERM broker ``i`` (controlled shutdown), SIGKILL it after ``timeout_s``."""
        return self._stop_brokers([i], timeout_s)

    def _stop_brokers(self, ids, timeout_s):
        pids = {i: self.broker_pid(i) for i in ids}
        running = [p for p in pids.values() if p]
        killed = []
        if not terminate(running, timeout_s, killed):
            raise ClusterError(f"could not stop broker pids {running}")
        for i, pid in pids.items():
            if pid in killed:
                print(f"broker {i} did not exit within {timeout_s:g} s of SIGTERM: sent SIGKILL "
                      "(its logs are recovered at the next start)", file=sys.stderr)
        for i in ids:
            self.pid_path(i).unlink(missing_ok=True)
        return sorted(i for i, p in pids.items() if p)

    def start(self):
        """Start the ensemble (if owned) and every broker that is down; return ``self``."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.ensemble:
            self.ensemble.start(timeout_s=self.start_timeout_s)
        started = [i for i in self.broker_ids if not self.broker_alive(i)]
        for i in started:
            self.start_broker(i, wait=False)
        for i in started:
            self.wait_for_broker(i)
        return self

    def stop(self, timeout_s=10.0):
        """Stop all brokers (TERM, KILL after ``timeout_s``), then the owned ensemble."""
        stopped = self._stop_brokers(list(self.broker_ids), timeout_s)
        if self.ensemble:
            self.ensemble.stop()
        return stopped

    def status(self):
        brokers = [{"id": i, "address": f"{HOST}:{self.port(i)}", "pid": self.broker_pid(i),
                    "listening": port_open(self.port(i))} for i in self.broker_ids]
        zk = self.ensemble.status() if self.ensemble else None
        return {"zookeeper.connect": self.connect_string,
                "bootstrap.servers": self.bootstrap_servers, "zookeeper": zk,
                "brokers": brokers}


def format_broker(b):
    if not b["pid"]:
        return f"broker-{b['id']} {b['address']} not running"
    return f"broker-{b['id']} {b['address']} pid {b['pid']} " + (
        "listening" if b["listening"] else "starting")


CLI_DEFAULTS = {"brokers": 3, "zookeepers": 3, "zk_port": 2181, "broker_port": 9092,
                "zk_session_timeout_ms": 6000, "zk_connect": None, "broker_config": []}


def _cluster_from_args(args):
    """Options not given fall back to those of the last ``start`` in DIR, then defaults."""
    saved_path = Path(args.dir) / "cluster.json"
    saved = json.loads(saved_path.read_text()) if saved_path.exists() else {}
    opts = {}
    for key, default in CLI_DEFAULTS.items():
        value = getattr(args, key)
        opts[key] = value if value is not None else saved.get(key, default)
    cluster = LocalCluster(args.dir, brokers=opts["brokers"], zookeepers=opts["zookeepers"],
                           zk_port=opts["zk_port"], broker_port=opts["broker_port"],
                           overrides=parse_overrides(opts["broker_config"]),
                           zk_connect=opts["zk_connect"],
                           zk_session_timeout_ms=opts["zk_session_timeout_ms"],
                           start_timeout_s=args.timeout)
    if args.action == "start":
        cluster.dir.mkdir(parents=True, exist_ok=True)
        saved_path.write_text(json.dumps(opts, indent=1) + "\n")
    return cluster


def _print_status(cluster, status):
    print(f"zookeeper.connect={status['zookeeper.connect']}")
    print(f"bootstrap.servers={status['bootstrap.servers']}")
    for node in (status["zookeeper"] or {}).get("nodes", []):
        print(format_node(node))
    for b in status["brokers"]:
        print(format_broker(b) + f" config {cluster.config_path(b['id'])}")


def main(argv=None):
    p = argparse.ArgumentParser(prog="kafka-ha-cluster.sh",
                                description="Run ZooKeeper and N brokers on 127.0.0.1.")
    p.add_argument("action", choices=("start", "stop", "status"))
    p.add_argument("--dir", required=True, help="state directory")
    p.add_argument("--brokers", type=int, help="number of brokers (default 3)")
    p.add_argument("--zookeepers", type=int, help="ZooKeeper ensemble size (default 3)")
    p.add_argument("--zk-port", type=int, help="first ZooKeeper client port (default 2181)")
    p.add_argument("--broker-port", type=int, help="port of broker 1 (default 9092)")
    p.add_argument("--zk-session-timeout-ms", type=int, help="default 6000")
    p.add_argument("--zk-connect", help="use this ZooKeeper instead of starting an ensemble")
    p.add_argument("--broker-config", nargs="+", action="extend", metavar="K=V",
                   help="broker config override, repeatable")
    p.add_argument("--timeout", type=float, default=60.0, help="start timeout, seconds")
    # A clean stop is a controlled shutdown (3 tries 5 s apart when every broker stops at
    # once) and a flush of every log, over a minute at 10,000 partitions.
    p.add_argument("--stop-timeout", type=float, default=120.0, metavar="SECONDS",
                   help="stop: SIGKILL after this many seconds (default 120) of a broker's "
                        "clean shutdown after SIGTERM")
    args = p.parse_args(argv)
    try:
        cluster = _cluster_from_args(args)
        if args.action == "start":
            cluster.start()
        elif args.action == "stop":
            stopped = cluster.stop(args.stop_timeout)
            print(f"stopped brokers {stopped}" + (" and ZooKeeper" if cluster.ensemble else ""))
            return 0
        status = cluster.status()
        _print_status(cluster, status)
        zk_ok = status["zookeeper"] is None or status["zookeeper"]["serving"]
        return 0 if zk_ok and all(b["pid"] and b["listening"] for b in status["brokers"]) else 1
    except (ClusterError, EnsembleError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
