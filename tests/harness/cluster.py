"""``ClusterFixture``: real broker processes in a fresh chroot of the shared ZooKeeper ensemble.

Each fixture gets its own chroot (``<ensemble>/test-<uuid>``), its own free broker ports
and its own directory, so tests never see each other's znodes, ports or logs, and only
the brokers (not ZooKeeper) are started per test.  Brokers run in the foreground of
``bin/kafka-server-start.sh`` as children of the test process that the kernel kills if
the test process dies.

Chroots are left behind in the session ensemble, which is discarded at the end of the
session: deleting them would race with the expiry of killed brokers' ephemeral nodes.
"""

import json
import shutil
import signal
import tempfile
import time
import uuid
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kafka_ha.tools.local_cluster import LocalCluster
from kafka_ha.tools.zk_ensemble import tail

from tests.harness.ports import free_ports
from tests.harness.zk import shared_ensemble

# The brokers' session timeout in tests that wait for a killed or stopped broker's session
# to expire: short, so that the controller reacts within seconds, yet long enough that a
# broker on a busy machine does not lose its session while it is not being tested.
SESSION_MS = 4000


def wait_until(predicate, timeout=30.0, interval=0.2, message="condition not met"):
    """Poll ``predicate()`` until it returns something truthy, and return that value.

    Exceptions raised by ``predicate`` count as "not yet".  At the deadline, raise
    AssertionError with ``message``, the last value and the last exception.

    >>> wait_until(lambda: 42, timeout=1)
    42
    >>> wait_until(lambda: [], timeout=0.1, interval=0.05, message="no items")
    Traceback (most recent call last):
    ...
    AssertionError: no items (not true after 0.1 s; last value: [])
    """
    deadline = time.monotonic() + timeout
    while True:
        error = None
        try:
            value = predicate()
        except Exception as e:  # noqa: BLE001 - polling: any failure means "not yet"
            value, error = None, e
        if value:
            return value
        if time.monotonic() >= deadline:
            detail = f"last value: {value!r}" + (f"; last error: {error!r}" if error else "")
            raise AssertionError(f"{message} (not true after {timeout} s; {detail})")
        time.sleep(interval)


class ClusterFixture:
    """``brokers`` brokers (ids 1..N) on a fresh chroot of ``ensemble`` (default: shared).

    ``overrides`` are broker config keys (typed values) applied to every broker.
    """

    def __init__(self, brokers=3, overrides=None, *, ensemble=None, session_timeout_ms=6000,
                 start_timeout_s=60.0, base_dir=None):
        self.ensemble = ensemble or shared_ensemble()
        self.chroot = f"/test-{uuid.uuid4().hex[:12]}"
        self.zk_hosts = self.ensemble.connect_string
        self.connect_string = self.zk_hosts + self.chroot
        self.dir = Path(base_dir or tempfile.mkdtemp(prefix="kafka-ha-cluster-"))
        self.cluster = LocalCluster(self.dir, brokers=brokers, overrides=overrides,
                                    zk_connect=self.connect_string,
                                    zk_session_timeout_ms=session_timeout_ms,
                                    broker_ports=free_ports(brokers), die_with_parent=True,
                                    start_timeout_s=start_timeout_s)
        self.session_timeout_ms = session_timeout_ms
        self._zk = None

    # -- lifecycle ---------------------------------------------------------------------
    def start(self, wait_registered=True, timeout=60.0, brokers=None):
        """Create the chroot, start every broker (or only the ids in ``brokers``: the others
        are there to be added later), and wait until they are in /brokers/ids."""
        root = KazooClient(hosts=self.zk_hosts, timeout=10)
        root.start(timeout=30)
        try:
            root.ensure_path(self.chroot)
        finally:
            root.stop()
            root.close()
        if brokers is None:
            self.cluster.start()
        else:
            for i in brokers:
                self.cluster.start_broker(i, wait=False)
            for i in brokers:
                self.cluster.wait_for_broker(i)
        if wait_registered:
            self.wait_registered(self.broker_ids if brokers is None else brokers, timeout)
        return self

    def stop(self, keep_dir=False):
        """Kill the brokers and close the kazoo client; delete the directory unless ``keep_dir``.

        The test is over, so brokers get SIGKILL: a graceful stop of every broker
        at once would spend controlled-shutdown retries on leaderships that have
        nowhere to go.
        """
        try:
            for i in self.broker_ids:
                if self.broker_alive(i):
                    self.cluster.kill_broker(i, signal.SIGKILL)
            self.cluster.stop()
        finally:
            if self._zk is not None:
                self._zk.stop()
                self._zk.close()
                self._zk = None
            if not keep_dir:
                shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop(keep_dir=exc[0] is not None)

    # -- brokers -----------------------------------------------------------------------
    @property
    def broker_ids(self):
        return list(self.cluster.broker_ids)

    @property
    def bootstrap_servers(self):
        return self.cluster.bootstrap_servers

    def bootstrap_of(self, ids):
        return self.cluster.bootstrap_of(ids)

    def port(self, i):
        return self.cluster.port(i)

    def config_path(self, i):
        return self.cluster.config_path(i)

    def data_dir(self, i):
        """Broker ``i``'s one log directory (``log.dirs``)."""
        return self.cluster.broker_dir(i) / "data"

    def broker_pid(self, i):
        return self.cluster.broker_pid(i)

    def broker_alive(self, i):
        return self.cluster.broker_alive(i)

    def exit_status(self, i):
        """Broker ``i``'s exit status once it has exited (``-N``: killed by signal N);
        None while it runs."""
        return self.cluster.broker_exit_status(i)

    def set_broker_config(self, i, config):
        """Config values of broker ``i``'s own, over the fixture's overrides; they apply
        from its next start."""
        self.cluster.broker_overrides.setdefault(i, {}).update(config)

    @property
    def zk_servers(self):
        """[(host, port)] of the ensemble's servers, in connect-string order."""
        return [(host, int(port)) for host, port in
                (server.rsplit(":", 1) for server in self.zk_hosts.split(","))]

    def connect_broker_through(self, i, address):
        """Broker ``i`` reaches ZooKeeper at ``address`` (``host:port``, e.g. a relay the test
        can cut) instead of the ensemble, with the fixture's chroot, from its next start."""
        self.set_broker_config(i, {"zookeeper.connect": address + self.chroot})

    def start_broker(self, i, wait=True):
        return self.cluster.start_broker(i, wait=wait)

    def adopt_broker(self, i, pid):
        """Broker ``i`` runs as ``pid``, started outside the fixture (by a documented
        procedure's ``kafka-server-start.sh -daemon``): from now on ``kill`` and ``stop``
        reach it through its pid file."""
        self.cluster.pid_path(i).write_text(f"{pid}\n")

    def kill(self, i, sig=signal.SIGKILL):
        """Send ``sig`` (default SIGKILL) to broker ``i``; KILL/TERM wait until it is gone."""
        return self.cluster.kill_broker(i, sig)

    def sigstop(self, i):
        return self.cluster.kill_broker(i, signal.SIGSTOP)

    def sigcont(self, i):
        return self.cluster.kill_broker(i, signal.SIGCONT)

    def restart(self, i, sig=signal.SIGTERM, timeout_s=10.0):
        """Stop broker ``i`` (``sig``, SIGKILL after ``timeout_s``) if alive, then start it."""
        if self.broker_alive(i):
            if sig == signal.SIGTERM:
                self.cluster.stop_broker(i, timeout_s)
            else:
                self.cluster.kill_broker(i, sig)
        return self.cluster.start_broker(i)

    # -- ZooKeeper ---------------------------------------------------------------------
    @property
    def zk(self):
        """A started kazoo client rooted at this fixture's chroot."""
        if self._zk is None:
            self._zk = KazooClient(hosts=self.connect_string, timeout=10)
            self._zk.start(timeout=30)
        return self._zk

    def registered_brokers(self):
        """Sorted ids under /brokers/ids ([] before any broker registered)."""
        try:
            return sorted(int(c) for c in self.zk.get_children("/brokers/ids"))
        except NoNodeError:
            return []

    def wait_registered(self, ids, timeout=60.0):
        ids = sorted(ids)
        return wait_until(lambda: set(ids) <= set(self.registered_brokers()), timeout,
                          message=f"brokers {ids} not all registered in /brokers/ids")

    def wait_deregistered(self, i, timeout=None):
        """Wait until /brokers/ids/<i> is gone (by default session timeout + 5 s)."""
        timeout = timeout or self.session_timeout_ms / 1000 + 5
        return wait_until(lambda: i not in self.registered_brokers(), timeout,
                          message=f"broker {i} still registered")

    def controller(self):
        """The broker id in /controller, or None when there is no controller."""
        try:
            data, _ = self.zk.get("/controller")
        except NoNodeError:
            return None
        value = json.loads(data)
        return value["brokerid"] if isinstance(value, dict) else int(value)

    def wait_until(self, predicate, timeout=30.0, interval=0.2, message="condition not met"):
        return wait_until(predicate, timeout, interval, message)

    # -- diagnostics -------------------------------------------------------------------
    def report_sections(self, lines=60):
        """(title, text) pairs with the tail of each broker's server.out and server.log."""
        sections = []
        for i in self.broker_ids:
            broker_dir = self.cluster.broker_dir(i)
            for name in ("server.out", "logs/server.log"):
                path = broker_dir / name
                if path.exists() and path.stat().st_size:
                    sections.append((f"broker-{i} {name} ({path})", tail(path, lines)))
        return sections
