"""How much of its logs a real broker re-checks at start-up, with Kafka's default flush settings.

No flush.messages or flush.ms: logs are only flushed when a segment rolls (the
recovery-point task, as Kafka on every roll) and at a clean shutdown.  So a
clean restart (SIGTERM) recovers nothing, and a crash (SIGKILL) recovers only
the active segment, not every segment written since the broker started.
"""

import re
import signal

import pytest

from tests.harness.kafka import create_topic, log_size, log_text
from tests.harness.load import produce, read_all
from tests.harness.replica_files import partition_dir, recovery_point

pytestmark = pytest.mark.system

BROKER = 1
OVERRIDES = {"log.flush.offset.checkpoint.interval.ms": 200}
RECOVERING = re.compile(r"\[Log partition=rolled-0, dir=\S+\] Recovering unflushed segment (\d+)")
VALUES = [b"v%04d" % i for i in range(300)]


def active_segment_base(cluster):
    return max(int(f.stem) for f in partition_dir(cluster, BROKER, "rolled").glob("*.log"))


def restart_and_read_log(cluster, sig):
    since = log_size(cluster, BROKER, "server.log")
    cluster.restart(BROKER, sig=sig)
    cluster.wait_registered([BROKER])
    assert [v for _, v in read_all(cluster, "rolled")] == VALUES, "the restarted broker lost records"
    return log_text(cluster, BROKER, "server.log", since)


def test_restarts_re_check_only_what_was_not_flushed(cluster_factory):
    cluster = cluster_factory(brokers=1, overrides=OVERRIDES)
    create_topic(cluster, "rolled", 1, 1, "--config", "segment.bytes=2000")
    for i in range(0, len(VALUES), 20):
        produce(cluster, "rolled", VALUES[i:i + 20], acks=1)       # batches of 20 roll many segments
    active = active_segment_base(cluster)
    assert active > 0, "the test needs rolled segments"
    # Without flush settings the recovery point still reaches the active segment.
    cluster.wait_until(lambda: recovery_point(cluster, BROKER, "rolled") == active, timeout=30,
                       message="the recovery point never reached the active segment without flush settings")

    crashed = restart_and_read_log(cluster, signal.SIGKILL)
    assert [int(b) for b in RECOVERING.findall(crashed)] == [active], crashed

    clean = restart_and_read_log(cluster, signal.SIGTERM)
    assert "Found clean shutdown file. Skipping recovery for all logs" in clean
    assert not RECOVERING.search(clean), clean
