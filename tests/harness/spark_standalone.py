"""A Spark standalone cluster (one master, N workers) from the installed pyspark, for system tests.

pyspark's wheel ships Spark's launch scripts and jars: ``<pyspark>/bin/spark-class``
runs ``org.apache.spark.deploy.master.Master`` and ``...deploy.worker.Worker``, the same
classes ``sbin/start-master.sh`` / ``start-worker.sh`` run in a Spark distribution (the
wheel has no ``sbin``).  Each runs in the foreground in its own session, dies with the
test (PR_SET_PDEATHSIG), and logs to ``<dir>/<name>.out``.  Workers start their executors
as child processes under ``<dir>/work-N/<app id>/<executor id>/`` (stdout, stderr).

Executors start Python workers with the driver's ``PYSPARK_PYTHON`` and their own
environment, which they inherit from the worker: ``python_path`` goes into the workers'
``PYTHONPATH`` so that executors import kafka_ha from this checkout.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.request
from pathlib import Path

from kafka_ha.tools.processes import spawn, tail
from tests.harness.ports import free_ports

HOST = "127.0.0.1"
ALIVE_LINE = "New state: ALIVE"       # the master's log line once it accepts registrations
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def log4j_properties(root_level: str, extra: str = "") -> str:
    """Spark's log4j2.properties: one console appender on stderr at ``root_level``."""
    return f"""rootLogger.level = {root_level}
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{HH:mm:ss.SSS}} %p %c{{1}}: %m%n
{extra}"""


# The daemons' deploy messages (the master's ALIVE line) are waited for: keep them.
LOG4J = log4j_properties("warn", "logger.deploy.name = org.apache.spark.deploy\nlogger.deploy.level = info\n")


def spark_home() -> Path:
    import pyspark
    return Path(pyspark.__file__).resolve().parent


class SparkStandalone:
    """``workers`` workers of ``cores`` cores and ``memory`` each, on 127.0.0.1."""

    def __init__(self, base_dir: Path, workers: int = 2, cores: int = 1, memory: str = "512m",
                 python_path: str | None = None) -> None:
        self.dir = Path(base_dir)
        self.workers, self.cores, self.memory = workers, cores, memory
        self.port, self.ui_port, *self.worker_ui_ports = free_ports(2 + workers)
        self.conf_dir = self.dir / "conf"
        self.python_path = python_path
        self.procs: dict[str, object] = {}

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def env(self) -> dict:
        """The environment of the daemons (and of a driver, which needs the same conf)."""
        env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_CONF_DIR=str(self.conf_dir),
                   SPARK_LOCAL_IP=HOST, PYSPARK_PYTHON=sys.executable,
                   PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_NO_DAEMONIZE="1")
        # The daemons idle: C1 only, the serial GC and a small heap start them in half the time
        # on a busy 2-CPU machine.
        env.setdefault("SPARK_DAEMON_JAVA_OPTS", QUICK_JVM)
        env.setdefault("SPARK_DAEMON_MEMORY", "256m")
        if self.python_path:
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (self.python_path, os.environ.get("PYTHONPATH")) if p)
        return env

    def start(self, timeout_s: float = 60.0) -> SparkStandalone:
        """Launch, and wait until every worker is registered and ALIVE."""
        self.launch()
        self.wait_alive_workers(timeout_s)
        return self

    def launch(self) -> None:
        """Start the daemons without waiting (a test starts its brokers meanwhile).

        A worker that finds no master, or one still in STANDBY, retries only after 5-15 s,
        so each worker's shell waits for the master's "New state: ALIVE" log line before
        it execs the JVM."""
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / "log4j2.properties").write_text(LOG4J)
        self._spawn("master", [self.spark_class, "org.apache.spark.deploy.master.Master",
                               "--host", HOST, "--port", str(self.port),
                               "--webui-port", str(self.ui_port)])
        wait_for_master = (f"until grep -qs '{ALIVE_LINE}' '{self.dir / 'master.out'}'; "
                           f"do sleep 0.2; done; exec \"$@\"")
        for i in range(self.workers):
            work = self.dir / f"work-{i}"
            work.mkdir(exist_ok=True)
            self._spawn(f"worker-{i}", [
                "bash", "-c", wait_for_master, "wait-for-master",
                self.spark_class, "org.apache.spark.deploy.worker.Worker", "--host", HOST,
                "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work),
                "--webui-port", str(self.worker_ui_ports[i]), self.master_url])

    @property
    def spark_class(self) -> str:
        return str(spark_home() / "bin" / "spark-class")

    def _spawn(self, name: str, argv: list[str]) -> None:
        self.procs[name] = spawn(argv, self.dir / f"{name}.out", cwd=self.dir, env=self.env(),
                                 die_with_parent=True)

    def state(self) -> dict:
        """The master's status page as JSON (workers, applications)."""
        with urllib.request.urlopen(f"http://{HOST}:{self.ui_port}/json/", timeout=5) as answer:
            return json.load(answer)

    def wait_master(self, timeout_s: float = 60.0) -> None:
        """Wait until the master accepts registrations (a driver that registers with a
        master in STANDBY waits 20 s before it tries again)."""
        deadline = time.monotonic() + timeout_s
        out = self.dir / "master.out"
        while ALIVE_LINE not in (out.read_text(errors="replace") if out.exists() else ""):
            if self.procs["master"].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the spark master is not ALIVE:\n{self.report()}")
            time.sleep(0.2)

    def wait_alive_workers(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"spark {name} exited ({proc.returncode}):\n"
                                       f"{tail(self.dir / f'{name}.out')}")
            try:
                alive = [w for w in self.state()["workers"] if w["state"] == "ALIVE"]
            except OSError:
                alive = []
            if len(alive) == self.workers:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(alive)} of {self.workers} spark workers alive after "
                                   f"{timeout_s} s:\n{self.report()}")
            time.sleep(0.3)

    def executor_logs(self) -> dict[str, Path]:
        """``{"<worker>/<app>/<executor id>": executor directory}`` of every executor started."""
        return {f"work-{i}/{d.parent.name}/{d.name}": d
                for i in range(self.workers)
                for d in sorted((self.dir / f"work-{i}").glob("app-*/*")) if d.is_dir()}

    def report(self, lines: int = 30) -> str:
        parts = [f"--- {name}.out ---\n{tail(self.dir / f'{name}.out', lines)}"
                 for name in self.procs]
        parts += [f"--- executor {name} stderr ---\n{tail(d / 'stderr', lines)}"
                  for name, d in self.executor_logs().items()]
        return "\n".join(parts)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM each daemon's process group (executors are in their worker's), then KILL."""
        for proc in self.procs.values():
            _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except Exception:   # still running after the grace period
                pass
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()

    def __enter__(self) -> SparkStandalone:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
