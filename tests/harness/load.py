"""Load for system tests: producing and reading a few records, a background producer of
unique values, and the history checker that judges what was read against what was sent
and acknowledged."""

import logging
import threading
import time
from typing import NamedTuple

import gevent

from kafka_ha.client.consumer import Consumer
from kafka_ha.client.producer import Producer

from tests.harness.cluster import wait_until

PRODUCER_LOGGER = "kafka_ha.client.producer"


def produce(cluster, topic, values, acks=-1, partition=0, via=None):
    """Offsets of ``values`` produced to ``topic``; ``via`` bootstraps through those brokers
    only (a stopped broker accepts connections but would hold the metadata request)."""
    p = Producer(cluster.bootstrap_of(via) if via else cluster.bootstrap_servers, acks=acks, retries=20)
    futures = [p.send(topic, v, partition=partition) for v in values]
    p.flush()
    offsets = [f.get(timeout=30).offset for f in futures] if acks != 0 else []
    p.close()
    return offsets


def read_all(cluster, topic, partition=0):
    """(offset, value) of every record of one partition, read to its end."""
    return [(r.offset, r.value) for r in read_partitions(cluster, topic, [partition])]


def read_partitions(cluster, topic, partitions):
    """Every record of ``topic``'s partitions 0..partitions-1 (or of the listed ones), read
    to the end each had when the read began."""
    c = Consumer(cluster.bootstrap_servers)
    ids = range(partitions) if isinstance(partitions, int) else partitions
    tps = [(topic, p) for p in ids]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    end = c.end_offsets(tps)
    out = []
    deadline = time.monotonic() + 60
    while any(c.position(tp) < end[tp] for tp in tps):
        assert time.monotonic() < deadline, "consumer stuck"
        out.extend(c.poll(500))
    c.close()
    return out


# ---- judging a history ------------------------------------------------------------------

class History(NamedTuple):
    """What the records read say about a producer's history (see ``judge``)."""
    read: int          # records read
    corrupt: list      # [(partition, offset, value)]: not a value sent, or in a second partition
    duplicates: dict   # {partition: copies of values already read earlier in that partition}
    reordered: list    # [(partition, offset, value, a larger value read before it)]
    lost: dict         # {value: (partition, offset)} acknowledged at an offset that lacks it
    surviving: int     # acknowledged at an offset and read there
    unseen: int        # values sent and never read anywhere (acks=0 and failed sends included)


def sent_value(raw, sent):
    """The int ``n`` if ``raw`` is exactly b"<n>" for a value sent (0 <= n < sent), else None.

    >>> [sent_value(v, 10) for v in (b"7", b"07", b"10", b"-1", b"x", None)]
    [7, None, None, None, None, None]
    """
    try:
        n = int(raw)
    except (TypeError, ValueError):
        return None
    return n if 0 <= n < sent and raw == b"%d" % n else None


def judge(records, sent, acked):
    """Judge ``records`` (read back, any order) against values 0..sent-1, b"<n>" each, and
    ``acked`` ({n: (partition, offset)}, offset -1 when the answer carried none, as for acks=0).

    Within a partition the first copy of each value must come in send order: the producer
    sends increasing values, one batch per partition in flight.  A later copy of a value is
    a duplicate (a retry of a batch that had been written); a value in another partition
    than its first copy, or than the one it was acknowledged in, is corrupt.
    """
    at, first_partition, corrupt, duplicates, reordered, highest = {}, {}, [], {}, [], {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        p, n = r.partition, sent_value(r.value, sent)
        home = first_partition.get(n, acked.get(n, (p,))[0])
        if n is None or home != p:
            corrupt.append((p, r.offset, r.value))
            continue
        at[(p, r.offset)] = n
        if n in first_partition:
            duplicates[p] = duplicates.get(p, 0) + 1
            continue
        first_partition[n] = p
        if n < highest.get(p, -1):
            reordered.append((p, r.offset, n, highest[p]))
        highest[p] = max(n, highest.get(p, -1))
    placed = {n: where for n, where in acked.items() if where[1] >= 0}
    lost = {n: where for n, where in placed.items() if at.get(where) != n}
    return History(len(records), corrupt, duplicates, reordered, lost,
                   len(placed) - len(lost), sent - len(first_partition))


def assert_intact(history, retried):
    """No corrupt record, no first copy out of send order, no more duplicates in a partition
    than records the producer sent again to it (``retried``: {partition: records})."""
    assert not history.corrupt, f"{len(history.corrupt)} corrupt records, e.g. {history.corrupt[:5]}"
    assert not history.reordered, \
        f"{len(history.reordered)} values read out of send order, e.g. {history.reordered[:5]}"
    unexplained = {p: (copies, retried.get(p, 0)) for p, copies in history.duplicates.items()
                   if copies > retried.get(p, 0)}
    assert not unexplained, f"{{partition: (duplicates, records sent again)}}: {unexplained}"


class RetryCounter(logging.Handler):
    """Records the producer sent again, per partition of one topic, from its "retrying N
    record(s) for TP" log lines.  Without idempotence a retry is the only way a value gets
    written twice; a retry of a batch that never left counts too, so this is an upper bound."""

    def __init__(self, topic):
        super().__init__(logging.INFO)
        self.topic, self.retried = topic, {}
        self._logger, self._level = logging.getLogger(PRODUCER_LOGGER), None

    def emit(self, record):
        if record.msg.startswith("retrying") and len(record.args) >= 2:
            count, tp = record.args[:2]
            if getattr(tp, "topic", None) == self.topic:
                self.retried[tp.partition] = self.retried.get(tp.partition, 0) + count

    def __enter__(self):
        self._level = self._logger.level
        if not self._logger.isEnabledFor(logging.INFO):
            self._logger.setLevel(logging.INFO)
        self._logger.addHandler(self)
        return self

    def __exit__(self, *exc):
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)


# ---- the producer -----------------------------------------------------------------------

class BackgroundProducer:
    """A producer writing unique values b"0", b"1", ... until stopped, on a thread of its own
    (with its own gevent hub, so a test's blocking waits do not stall it).

    ``acks`` and ``producer_config`` go to the Producer (acks=all, retries=1000 and
    linger_ms=2 unless given).  It records what was acknowledged (``acked``: {n: (partition,
    offset)}, offset -1 for acks=0, where the answer is only that the request left), what
    failed (info, not failure: such a value may or may not be written), how many values
    it sent (``sent``) and how many records it sent again (``retries.retried``).
    ``pause_s`` between chunks of 50 bounds the rate where nothing else does (acks=0).
    """

    def __init__(self, cluster, topic, acks="all", pause_s=0.0, **producer_config):
        self.bootstrap = cluster.bootstrap_servers
        self.topic, self.acked, self.stop_flag = topic, {}, threading.Event()
        self.failed, self.sent, self.pause_s = [], 0, pause_s
        self.config = {"acks": acks, "retries": 1000, "linger_ms": 2, **producer_config}
        self.retries = RetryCounter(topic)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        # The client is gevent-based: create and use it on this thread's own hub only.
        self.producer = Producer(self.bootstrap, **self.config)
        try:
            self._produce()
        finally:
            self.producer.close()
            # This thread's greenlets must die on this thread.  Left referenced from the
            # main thread (through self.producer), they were freed there after the thread
            # had ended, by greenlet's clean-up of a dead thread's state, which once spun
            # for minutes inside a test (greenlet 3.5, under pytest-xdist).
            self.producer = None
            gevent.get_hub().destroy(destroy_loop=True)

    def _produce(self):
        i = 0
        while not self.stop_flag.is_set():
            futures = [(n, self.producer.send(self.topic, b"%d" % n)) for n in range(i, i + 50)]
            i += 50
            self.sent = i
            self.producer.flush()
            for n, f in futures:
                try:
                    meta = f.get(timeout=60)
                    self.acked[n] = (meta.partition, meta.offset)
                except Exception as e:  # not acknowledged: allowed to be lost
                    self.failed.append((n, repr(e)))
            self.stop_flag.wait(self.pause_s)

    def wait_progress(self, count, timeout=90, what="production"):
        """Wait until ``count`` more values are acknowledged than now."""
        target = len(self.acked) + count
        wait_until(lambda: len(self.acked) >= target, timeout,
                   message=f"{what} did not get {count} more acknowledgements")

    def __enter__(self):
        self.retries.__enter__()
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_flag.set()
        self.thread.join(120)
        self.retries.__exit__(*exc)

    def history(self, cluster, partitions):
        """``judge`` what ``partitions`` (as for read_partitions) hold now."""
        return judge(read_partitions(cluster, self.topic, partitions), self.sent, self.acked)

    def check_nothing_lost(self, cluster, partitions):
        records = read_partitions(cluster, self.topic, partitions)
        lost = judge(records, self.sent, self.acked).lost
        assert self.acked, "nothing was acknowledged"
        where_found = {r.value: (r.partition, r.offset) for r in records}
        assert not lost, (f"{len(lost)} acknowledged messages lost, e.g. "
                          f"{[(n, where, where_found.get(b'%d' % n)) for n, where in list(lost.items())[:5]]}")
