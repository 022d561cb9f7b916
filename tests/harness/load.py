"""Load for system tests: a background acks=all producer and a reader that checks it."""

import threading
import time

from kafka_ha.client.consumer import Consumer
from kafka_ha.client.producer import Producer


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


class BackgroundProducer:
    """acks=all producer writing unique values until stopped, on a thread of its own (with its
    own gevent hub, so a test's blocking waits do not stall it); records what was
    acknowledged, and what failed (info, not failure: such a value may or may not be written)."""

    def __init__(self, cluster, topic):
        self.bootstrap = cluster.bootstrap_servers
        self.topic, self.acked, self.stop_flag = topic, {}, threading.Event()
        self.failed = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        # The client is gevent-based: create and use it on this thread's own hub only.
        self.producer = Producer(self.bootstrap, acks=-1, retries=1000, linger_ms=2)
        try:
            self._produce()
        finally:
            self.producer.close()

    def _produce(self):
        i = 0
        while not self.stop_flag.is_set():
            futures = [(n, self.producer.send(self.topic, b"%d" % n)) for n in range(i, i + 50)]
            i += 50
            self.producer.flush()
            for n, f in futures:
                try:
                    meta = f.get(timeout=60)
                    self.acked[n] = (meta.partition, meta.offset)
                except Exception as e:  # not acknowledged: allowed to be lost
                    self.failed.append((n, repr(e)))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_flag.set()
        self.thread.join(120)

    def check_nothing_lost(self, cluster, partitions):
        records = read_partitions(cluster, self.topic, partitions)
        at = {(r.partition, r.offset): int(r.value) for r in records}
        lost = [n for n, where in self.acked.items() if at.get(where) != n]
        assert self.acked, "nothing was acknowledged"
        where_found = {int(r.value): (r.partition, r.offset) for r in records}
        assert not lost, (f"{len(lost)} acknowledged messages lost, e.g. "
                          f"{[(n, self.acked[n], where_found.get(n)) for n in lost[:5]]}")
