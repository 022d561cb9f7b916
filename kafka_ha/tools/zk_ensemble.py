"""Run a local ZooKeeper ensemble: one real ZooKeeper server per node on 127.0.0.1.

Stdlib only, so it works before the project's dependencies are installed.  The servers
are Debian's ``zookeeper`` package (``/usr/share/java/zookeeper.jar``, main class
``QuorumPeerMain``) launched with ``java`` directly, detached from the caller.

Port layout for base port P and node i (1-based, k = i - 1)::

    client    P + k            2181, 2182, 2183 for P=2181
    quorum    P + 100 + 2k     2281, 2283, 2285  (follower <-> leader)
    election  P + 101 + 2k     2282, 2284, 2286  (leader election)

so an ensemble never collides with itself or with broker ports (9092 and up).

Files of node i, under ``DIR/zk-<i>/``: ``zoo.cfg``, ``log4j.properties``,
``data/myid`` (plus snapshots and transaction logs), ``log/zookeeper.log``,
``zookeeper.out`` (JVM stdout/stderr) and ``zookeeper.pid``.  ``DIR/ensemble.json``
remembers the size and base port so ``stop``/``status`` need only ``--dir``.

The configuration is tuned for tests, not durability: ``tickTime=500`` lets clients ask
for sessions as short as 1 s (the server clamps timeouts to [minSessionTimeout,
maxSessionTimeout], by default [2, 20] ticks, so both are set explicitly);
``forceSync=no`` and a small ``preAllocSize`` avoid fsync stalls and 64 MB pre-allocated
logs on shared CI disks.  Losing the tail of a transaction log on power loss does not
matter for a throw-away test ensemble.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path

from kafka_ha.tools.processes import (HOST, owned_alive, pid_alive, pid_cmdline, port_free,
                                      read_pid, spawn, tail, terminate)

ZK_JAR = "/usr/share/java/zookeeper.jar"
# The jar's manifest pulls in slf4j-api but no binding; add log4j so the node logs.
LOG_JARS = ("/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
SERVING_MODES = ("leader", "follower", "standalone")
LOG4J_TEMPLATE = Path(__file__).resolve().parents[2] / "conf" / "zookeeper-log4j.properties"
DEFAULT_LOG4J = """\
log4j.rootLogger=INFO, ROLLINGFILE
log4j.appender.ROLLINGFILE=org.apache.log4j.RollingFileAppender
log4j.appender.ROLLINGFILE.File=${zookeeper.log.dir}/zookeeper.log
log4j.appender.ROLLINGFILE.MaxFileSize=10MB
log4j.appender.ROLLINGFILE.MaxBackupIndex=2
log4j.appender.ROLLINGFILE.layout=org.apache.log4j.PatternLayout
log4j.appender.ROLLINGFILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
"""
# 1 GiB of heap: a 100k-partition cluster's multis ran a 256 MiB ZooKeeper out of
# memory (the controller bench).  The full JIT stays on: the benchmarks measure
# ZooKeeper under load, and C1 alone halves its throughput.
DEFAULT_JVM_OPTS = ("-Xms64m", "-Xmx1g", "-XX:+UseSerialGC", "-XX:-UsePerfData",
                    "-Djava.awt.headless=true")


class EnsembleError(RuntimeError):
    """A node could not be started, or the ensemble did not become ready in time."""


def four_letter(port, cmd="srvr", host=HOST, timeout_s=2.0):
    """Send a ZooKeeper four-letter word; return the reply text, or None if unreachable."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(cmd.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
    except OSError:
        return None
    return b"".join(chunks).decode(errors="replace")


def server_command(zoo_cfg, log_dir, log4j_file, java="java", jvm_opts=()):
    """The command line of one ZooKeeper server on ``zoo_cfg`` (Debian's jar and main
    class, as its own service runs it), logging to ``log_dir/zookeeper.log``."""
    classpath = ":".join([str(Path(zoo_cfg).parent), ZK_JAR] + [j for j in LOG_JARS if os.path.exists(j)])
    return [java, *jvm_opts, "-cp", classpath,
            f"-Dzookeeper.log.dir={log_dir}", "-Dzookeeper.log.file=zookeeper.log",
            f"-Dlog4j.configuration=file:{log4j_file}", MAIN_CLASS, str(zoo_cfg)]


# -- the ensemble ------------------------------------------------------------------------

class Ensemble:
    """``nodes`` ZooKeeper servers on 127.0.0.1 with their files under ``dir``.

    All state lives in the files (pid files, ``ensemble.json``), so any number of
    ``Ensemble`` objects, or the CLI, can manage the same ensemble.
    """

    def __init__(self, dir, nodes=3, zk_port=2181, *, java=None, jvm_opts=None,
                 die_with_parent=False):
        if nodes < 1:
            raise ValueError("an ensemble needs at least one node")
        self.dir = Path(dir).resolve()
        self.nodes = nodes
        self.zk_port = zk_port
        self.java = java or os.environ.get("KAFKA_HA_JAVA") or shutil.which("java") or "java"
        self.jvm_opts = list(jvm_opts or DEFAULT_JVM_OPTS)
        self.die_with_parent = die_with_parent
        self._procs = {}  # Popen objects of nodes started by this object (kept for reaping)

    @classmethod
    def from_dir(cls, dir, **kwargs):
        """The ensemble recorded in ``dir/ensemble.json`` by an earlier ``start()``."""
        saved = json.loads((Path(dir) / "ensemble.json").read_text())
        return cls(dir, nodes=saved["nodes"], zk_port=saved["zk_port"], **kwargs)

    # ports and paths
    @property
    def ids(self):
        return range(1, self.nodes + 1)

    def client_port(self, i):
        return self.zk_port + i - 1

    def quorum_port(self, i):
        return self.zk_port + 100 + 2 * (i - 1)

    def election_port(self, i):
        return self.zk_port + 101 + 2 * (i - 1)

    def ports(self, i):
        if self.nodes == 1:
            return [self.client_port(i)]
        return [self.client_port(i), self.quorum_port(i), self.election_port(i)]

    @property
    def connect_string(self):
        return ",".join(f"{HOST}:{self.client_port(i)}" for i in self.ids)

    def node_dir(self, i):
        return self.dir / f"zk-{i}"

    def _pid_file(self, i):
        return self.node_dir(i) / "zookeeper.pid"

    def _out_file(self, i):
        return self.node_dir(i) / "zookeeper.out"

    def log_file(self, i):
        return self.node_dir(i) / "log" / "zookeeper.log"

    # configuration
    def config_text(self, i):
        """The zoo.cfg of node ``i``; see the module docstring for the choices."""
        lines = [
            "# generated by kafka_ha.tools.zk_ensemble; rewritten on every start",
            f"dataDir={self.node_dir(i) / 'data'}",
            f"clientPort={self.client_port(i)}",
            f"clientPortAddress={HOST}",
            "tickTime=500",
            "initLimit=20",
            "syncLimit=10",
            "minSessionTimeout=1000",
            "maxSessionTimeout=30000",
            "maxClientCnxns=0",
            "4lw.commands.whitelist=*",
            "admin.enableServer=false",
            "autopurge.purgeInterval=0",
            "preAllocSize=4096",
            "forceSync=no",
        ]
        if self.nodes > 1:
            lines += ["standaloneEnabled=false", "reconfigEnabled=false"]
            lines += [f"server.{j}={HOST}:{self.quorum_port(j)}:{self.election_port(j)}"
                      for j in self.ids]
        return "\n".join(lines) + "\n"

    def _log4j_text(self):
        try:
            return LOG4J_TEMPLATE.read_text()
        except OSError:
            return DEFAULT_LOG4J

    def _prepare(self, i):
        node = self.node_dir(i)
        for sub in ("data", "log"):
            (node / sub).mkdir(parents=True, exist_ok=True)
        (node / "data" / "myid").write_text(f"{i}\n")
        (node / "zoo.cfg").write_text(self.config_text(i))
        (node / "log4j.properties").write_text(self._log4j_text())

    def _command(self, i):
        node = self.node_dir(i)
        return server_command(node / "zoo.cfg", node / "log", node / "log4j.properties", self.java,
                              [*self.jvm_opts, "-Dzookeeper.forceSync=no", "-Dzookeeper.preAllocSize=4096",
                               "-Dzookeeper.snapshot.trust.empty=true", "-Dzookeeper.jmx.log4j.disable=true"])

    # processes
    def node_pid(self, i):
        """The pid of node ``i`` if it is running (a stale or reused pid gives None)."""
        pid = read_pid(self._pid_file(i))
        if owned_alive(self._procs.get(i), pid) or (
                pid_alive(pid) and str(self.node_dir(i) / "zoo.cfg") in pid_cmdline(pid)):
            return pid
        return None

    def start_node(self, i):
        """Start node ``i`` unless it is running; return its pid.  Does not wait."""
        pid = self.node_pid(i)
        if pid:
            return pid
        if not os.path.exists(ZK_JAR):
            raise EnsembleError(f"{ZK_JAR} not found: run bin/install.sh (Debian zookeeper)")
        busy = [p for p in self.ports(i) if not port_free(p)]
        if busy:
            raise EnsembleError(f"zk-{i}: port(s) {busy} on {HOST} already in use")
        self._prepare(i)
        proc = spawn(self._command(i), self._out_file(i), cwd=self.node_dir(i),
                     die_with_parent=self.die_with_parent)
        self._procs[i] = proc
        self._pid_file(i).write_text(f"{proc.pid}\n")
        return proc.pid

    def start(self, timeout_s=60):
        """Start every node that is not running and wait for a serving quorum."""
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "ensemble.json").write_text(
            json.dumps({"nodes": self.nodes, "zk_port": self.zk_port}) + "\n")
        for i in self.ids:
            self.start_node(i)
        self.wait_ready(timeout_s)
        return self.connect_string

    def wait_ready(self, timeout_s=60):
        """Wait until every node answers ``srvr`` in a serving mode and one of them leads."""
        deadline = time.monotonic() + timeout_s
        while True:
            modes = {i: self.node_mode(i) for i in self.ids}
            dead = [i for i in self.ids if self.node_pid(i) is None]
            if dead:
                raise EnsembleError(self._failure(
                    f"zk-{dead[0]} exited during startup{self._exit_detail(dead[0])}", dead[0]))
            if all(m in SERVING_MODES for m in modes.values()) and self.leader(modes):
                return
            if time.monotonic() >= deadline:
                slow = next(i for i in self.ids if modes[i] not in SERVING_MODES)
                raise EnsembleError(self._failure(
                    f"ZooKeeper ensemble not ready after {timeout_s}s (modes {modes})", slow))
            time.sleep(0.2)

    def _exit_detail(self, i):
        """`` (pid P, exit status S)`` of node ``i`` if this object started it, else ''."""
        proc = self._procs.get(i)
        if proc is None or proc.poll() is None:
            return ""
        status = proc.returncode
        how = f"killed by signal {-status}" if status < 0 else f"exit status {status}"
        return f" (pid {proc.pid}, {how})"

    def _failure(self, headline, i):
        return (f"{headline}\n--- tail of {self.log_file(i)} ---\n{tail(self.log_file(i))}"
                f"\n--- tail of {self._out_file(i)} ---\n{tail(self._out_file(i), 15)}")

    def node_mode(self, i):
        """'leader', 'follower', 'standalone', 'not serving' or None if unreachable."""
        reply = four_letter(self.client_port(i), "srvr")
        if reply is None:
            return None
        for line in reply.splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return "not serving"

    def leader(self, modes=None):
        """The id of the node in leader (or standalone) mode, or None."""
        modes = modes or {i: self.node_mode(i) for i in self.ids}
        return next((i for i, m in modes.items() if m in ("leader", "standalone")), None)

    def kill(self, i, sig=signal.SIGKILL, wait=True):
        """Send ``sig`` to node ``i``; for KILL/TERM wait until it is gone."""
        pid = self.node_pid(i)
        if pid is None:
            return None
        os.kill(pid, sig)
        if wait and sig in (signal.SIGKILL, signal.SIGTERM):
            self._wait_exited(i, pid, 10.0)
        return pid

    def _wait_exited(self, i, pid, timeout_s):
        """Wait until ``node_pid(i)`` (what ``start_node`` asks) no longer finds ``pid``.

        ``pid_alive`` alone is not enough: a dying JVM's main thread is a zombie ("Z" in
        /proc) while its other threads still exit, and until the last one has, the
        process cannot be reaped, so our Popen still says it runs.  A ``start_node``
        in that window found the old process "running", started nothing, and
        ``wait_ready`` then saw it exit: "zk-N exited during startup".
        """
        deadline = time.monotonic() + timeout_s
        while self.node_pid(i) == pid:
            if time.monotonic() >= deadline:
                raise EnsembleError(f"zk-{i} (pid {pid}) still running {timeout_s}s after a kill")
            time.sleep(0.02)

    def stop(self, timeout_s=5.0):
        """Stop every node (TERM, then KILL after ``timeout_s``); return the stopped ids."""
        pids = {i: self.node_pid(i) for i in self.ids}
        running = {i: p for i, p in pids.items() if p}
        ok = terminate(list(running.values()), timeout_s)
        if ok:  # gone by /proc; wait until they are reaped as well (see _wait_exited)
            for i, pid in running.items():
                self._wait_exited(i, pid, 10.0)
        for i in self.ids:
            self._pid_file(i).unlink(missing_ok=True)
        if not ok:
            raise EnsembleError(f"could not stop ZooKeeper pids {sorted(running.values())}")
        return sorted(running)

    def status(self):
        """{'connect_string', 'serving', 'leader', 'nodes': [{'id', 'address', 'pid', 'mode'}]}."""
        nodes = []
        for i in self.ids:
            pid = self.node_pid(i)
            mode = (self.node_mode(i) or "not answering") if pid else "not running"
            nodes.append({"id": i, "address": f"{HOST}:{self.client_port(i)}", "pid": pid,
                          "mode": mode})
        modes = {n["id"]: n["mode"] for n in nodes}
        serving = sum(m in SERVING_MODES for m in modes.values())
        leader = self.leader(modes)
        return {"connect_string": self.connect_string, "leader": leader, "nodes": nodes,
                "serving": bool(leader) and serving > self.nodes // 2}


def format_node(node):
    pid = f"pid {node['pid']} " if node["pid"] else ""
    return f"zk-{node['id']} {node['address']} {pid}{node['mode']}"


def _ensemble_from_args(args):
    saved = {}
    if (Path(args.dir) / "ensemble.json").exists():
        saved = json.loads((Path(args.dir) / "ensemble.json").read_text())
    nodes = args.nodes or saved.get("nodes", 3)
    zk_port = args.zk_port or saved.get("zk_port", 2181)
    return Ensemble(args.dir, nodes=nodes, zk_port=zk_port)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="zookeeper-ensemble.sh",
                                     description="Run a local ZooKeeper ensemble on 127.0.0.1.")
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument("--dir", required=True, help="state directory (zk-<i>/ per node)")
    parser.add_argument("--nodes", type=int, help="ensemble size (default 3, or as started)")
    parser.add_argument("--zk-port", type=int,
                        help="first client port (default 2181, or as started)")
    parser.add_argument("--timeout", type=float, default=60.0, help="start timeout, seconds")
    args = parser.parse_args(argv)
    ens = _ensemble_from_args(args)
    try:
        if args.action == "start":
            before = {i: ens.node_pid(i) for i in ens.ids}
            ens.start(timeout_s=args.timeout)
            for node in ens.status()["nodes"]:
                print(format_node(node) + (" (already running)" if before[node["id"]] else ""))
            print(f"zookeeper.connect={ens.connect_string}")
            return 0
        if args.action == "stop":
            stopped = ens.stop()
            for i in ens.ids:
                print(f"zk-{i} {HOST}:{ens.client_port(i)} "
                      + ("stopped" if i in stopped else "not running"))
            return 0
        status = ens.status()
        for node in status["nodes"]:
            print(format_node(node))
        return 0 if status["serving"] else 1
    except EnsembleError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
