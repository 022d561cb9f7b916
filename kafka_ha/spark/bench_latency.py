"""Streaming end-to-end latency per micro-batch, for :mod:`kafka_ha.spark.bench`.

A producer thread sends records at a steady rate, each value starting with its send
time (``time.time_ns()``, 19 digits).  A ``readStream.format("kafka_ha")`` query with the
default trigger (the next micro-batch starts as soon as the last one ends) hands each
batch to ``foreachBatch``, which collects the batch's oldest and newest send times and
its row count to the driver; the batch's latency is the time that collect returned
minus its oldest send time: how long its first record waited, from the producer's
``send`` through the broker (acks=all), planning, the executors' reads and Spark, to a
result on the driver.  The newest record's wait is recorded too.  Producer, brokers,
Spark and this process share one clock.

>>> percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50), percentile([5.0, 1.0, 3.0, 2.0, 4.0], 99)
(3.0, 5.0)
>>> percentile([], 50) is None
True
"""
from __future__ import annotations

import math
import threading
import time

import gevent

from kafka_ha.client import Producer

STAMP_DIGITS = 19


def percentile(values: list[float], pct: float) -> float | None:
    """The nearest-rank percentile (the smallest value with ``pct`` % at or below it)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


class PacedProducer:
    """Sends ``rate`` records/s of ``size`` bytes to ``topic`` for ``seconds``, on a thread
    of its own (the client is gevent-based: it lives and is used on that thread only)."""

    def __init__(self, bootstrap: str, topic: str, rate: int, seconds: float, size: int) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.rate, self.seconds, self.pad = rate, seconds, b"x" * max(0, size - STAMP_DIGITS)
        self.sent, self.error = 0, None
        self.thread = threading.Thread(target=self._run, daemon=True, name="paced-producer")

    def _run(self) -> None:
        try:
            producer = Producer(self.bootstrap, acks="all", linger_ms=1)
            started = time.monotonic()
            while (elapsed := time.monotonic() - started) < self.seconds:
                due = int(elapsed * self.rate) - self.sent
                for _ in range(due):
                    producer.send(self.topic, value=b"%019d" % time.time_ns() + self.pad)
                self.sent += due
                gevent.sleep(0.002)          # lets the sender greenlet ship batches
            producer.flush()
            producer.close()
        except BaseException as exc:   # reported by join()
            self.error = exc

    def start(self) -> PacedProducer:
        self.thread.start()
        return self

    def join(self) -> int:
        self.thread.join()
        if self.error is not None:
            raise RuntimeError(f"the paced producer failed: {self.error!r}") from self.error
        return self.sent


def stream_latency(spark, bootstrap: str, topic: str, rate: int, seconds: float,
                   size: int) -> dict:
    """Run the measurement on ``topic`` (empty or not: the query starts at ``latest``).

    Returns ``{"batches": [{"rows", "oldest_ms", "newest_ms"}...], "sent", "rate",
    "seconds"}`` for the batches that had rows."""
    from pyspark.sql import functions as F

    batches: list[dict] = []
    stamp = F.col("value").cast("string").substr(1, STAMP_DIGITS).cast("long")

    def measure(df, batch_id: int) -> None:
        row = df.agg(F.count("*").alias("n"), F.min(stamp).alias("oldest"),
                     F.max(stamp).alias("newest")).collect()[0]
        now = time.time_ns()
        if row.n:
            batches.append({"batch": batch_id, "rows": row.n,
                            "oldest_ms": (now - row.oldest) / 1e6,
                            "newest_ms": (now - row.newest) / 1e6})

    stream = (spark.readStream.format("kafka_ha").option("bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "latest").load())
    query = stream.writeStream.foreachBatch(measure).start()
    try:
        # the first batch (empty, at "latest") pays for the query's start-up
        deadline = time.monotonic() + 120
        while not query.recentProgress and time.monotonic() < deadline:
            if query.exception() is not None:
                raise RuntimeError(f"latency query failed: {query.exception()}")
            time.sleep(0.1)
        producer = PacedProducer(bootstrap, topic, rate, seconds, size).start()
        sent = producer.join()
        deadline = time.monotonic() + 60
        while sum(b["rows"] for b in batches) < sent and time.monotonic() < deadline:
            if query.exception() is not None:
                raise RuntimeError(f"latency query failed: {query.exception()}")
            time.sleep(0.1)
    finally:
        query.stop()
    received = sum(b["rows"] for b in batches)
    if received != sent:
        raise RuntimeError(f"the latency query read {received} of the {sent} records sent")
    return {"batches": batches, "sent": sent, "rate": rate, "seconds": seconds}
