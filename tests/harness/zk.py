"""ZooKeeper for tests: the session-wide ensemble, private ensembles, and ``zkcli()``.

``shared_ensemble()`` starts one 3-node ensemble per test session, on a random free port
block under a temporary directory, and stops it when the interpreter exits (its nodes are
also SIGKILLed by the kernel if the test process dies).  Tests isolate themselves with a
chroot each (see :mod:`tests.harness.cluster`) instead of paying for an ensemble each.

Set ``KAFKA_HA_TEST_ZK_DIR`` to the ``--dir`` of an ensemble started with
``bin/zookeeper-ensemble.sh`` to reuse it across runs; it is then left running.
"""

import atexit
import os
import shutil
import subprocess
import tempfile

from kafka_ha.tools.zk_ensemble import Ensemble

from tests.harness.ports import free_port_block

ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"
ENV_DIR = "KAFKA_HA_TEST_ZK_DIR"
# zkCli.sh passes $CLIENT_JVMFLAGS to java; a small, quick-starting JVM saves ~0.3 s a call.
CLIENT_JVMFLAGS = "-Xmx64m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData"
BANNER_PREFIXES = ("Connecting to ", "WATCHER::", "WatchedEvent state:")

_shared = None


def ensemble_port_offsets(nodes=3):
    """Offsets from the base port used by an ensemble (see zk_ensemble's port layout)."""
    return list(range(nodes)) + list(range(100, 100 + 2 * nodes))


def private_ensemble(nodes=3, dir=None, start=True, timeout_s=90):
    """A new ensemble on free ports in a new temporary directory (or ``dir``)."""
    base = free_port_block(ensemble_port_offsets(nodes))
    dir = dir or tempfile.mkdtemp(prefix="kafka-ha-zk-")
    ens = Ensemble(dir, nodes=nodes, zk_port=base, die_with_parent=True)
    if start:
        ens.start(timeout_s=timeout_s)
    return ens


def destroy(ens):
    """Stop ``ens`` and delete its directory."""
    try:
        ens.stop()
    finally:
        shutil.rmtree(ens.dir, ignore_errors=True)


def shared_ensemble():
    """The running 3-node ensemble shared by the whole test session (started on first use)."""
    global _shared
    if _shared is None:
        existing = os.environ.get(ENV_DIR)
        if existing:
            # Ours from another copy of this module, or the user's: reuse, never stop it.
            ens = Ensemble.from_dir(existing)
            ens.start(timeout_s=90)
        else:
            ens = private_ensemble(3)
            os.environ[ENV_DIR] = str(ens.dir)
            atexit.register(destroy, ens)
        _shared = ens
    return _shared


def strip_banner(stdout):
    """Drop zkCli.sh's connection banner, keeping the command's own output.

    >>> strip_banner("Connecting to h:1\\n\\nWATCHER::\\n\\n"
    ...              "WatchedEvent state:SyncConnected type:None path:null\\n[1, 2]\\n")
    '[1, 2]\\n'
    >>> strip_banner("Connecting to h:1\\nKeeperErrorCode = ConnectionLoss for /x\\n")
    'KeeperErrorCode = ConnectionLoss for /x\\n'
    """
    lines = stdout.splitlines(keepends=True)
    for k, line in enumerate(lines):
        if line.startswith("WatchedEvent state:SyncConnected"):
            return "".join(lines[k + 1:])
    while lines and (not lines[0].strip() or lines[0].startswith(BANNER_PREFIXES)):
        lines.pop(0)
    return "".join(lines)


def zkcli(connect, *args, timeout_s=60):
    """Run one ``zkCli.sh -server CONNECT ARGS...`` command: ``(rc, stdout, stderr)``.

    ``connect`` is ``host:port[,...][/chroot]``; stdout has the 5-line connection banner
    stripped.  A missing node gives rc 1 and ``Node does not exist: /x`` on stderr.
    """
    env = dict(os.environ)
    env.setdefault("CLIENT_JVMFLAGS", CLIENT_JVMFLAGS)
    done = subprocess.run([ZKCLI, "-server", connect, *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout_s, env=env)
    return done.returncode, strip_banner(done.stdout), done.stderr
