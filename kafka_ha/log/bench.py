"""Throughput of the log data path, in process (not a test): ``python -m kafka_ha.log.bench``.

Measures leader appends (offset assignment + write), follower appends (CRC +
contiguity + write) and consumer reads (locating whole entries, then
``os.pread`` of the slices, i.e. what a non-sendfile network path costs).
Writes go to the page cache: the numbers exclude fsync, as the data path does.

``--epochs N`` instead measures what a LeaderAndIsr for N partitions costs in
leader-epoch-checkpoint writes: one epoch assignment per partition as the
broker does it (an atomic rename, no fsync), the same with an fsync per
change, and the later sync when the logs are flushed.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from kafka_ha.model import TopicPartition
from kafka_ha.records import Record, build_legacy_message_set, build_v2_batch, iter_entries

from .config import LogConfig
from .log import Log

MB = 1_000_000


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _report(name: str, nbytes: int, seconds: float, ops: int) -> None:
    print(f"{name:<46} {nbytes / MB / seconds:9.1f} MB/s {ops / seconds:11,.0f} ops/s "
          f"({nbytes / MB:.0f} MB in {seconds:.2f} s)")


def bench_appends(root: str, payload: bytes, total_bytes: int, name: str) -> Log:
    log = Log(os.path.join(root, f"{name}-0"), TopicPartition(name, 0), LogConfig())
    n = max(1, total_bytes // len(payload))
    seconds = _timed(lambda: [log.append_as_leader(payload, 1) for _ in range(n)])
    _report(f"leader append, {name}", n * len(payload), seconds, n)
    return log


def fetch_plan(log: Log, max_bytes: int) -> list[tuple[int, bytes]]:
    """The ``(fetch offset, data)`` sequence of a consumer reading the whole log."""
    plan, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes).to_bytes()
        plan.append((offset, data))
        offset = list(iter_entries(data))[-1].last_offset + 1
    return plan


def bench_follower(root: str, plan: list[tuple[int, bytes]], fetch_bytes: int) -> None:
    follower = Log(os.path.join(root, "follower-0"), TopicPartition("follower", 0), LogConfig())
    seconds = _timed(lambda: [follower.append_as_follower(data) for _, data in plan])
    _report(f"follower append, {fetch_bytes >> 10} KiB fetches", sum(len(d) for _, d in plan),
            seconds, len(plan))
    follower.close()


def bench_reads(log: Log, plan: list[tuple[int, bytes]], max_bytes: int, copy: bool) -> None:
    def run():
        for offset, _ in plan:
            for piece in log.read(offset, max_bytes).slices:
                if copy:
                    os.pread(piece.fileno, piece.length, piece.position)
    seconds = _timed(run)
    what = "read + pread" if copy else "read, slices only (sendfile path)"
    _report(f"consumer {what}, {max_bytes >> 10} KiB", sum(len(d) for _, d in plan), seconds, len(plan))


def bench_epoch_assignments(root: str, partitions: int) -> None:
    logs = [Log(os.path.join(root, f"e-{i}"), TopicPartition("e", i), LogConfig()) for i in range(partitions)]

    def assign_all(epoch: int, sync: bool) -> float:
        worst = 0.0
        for lg in logs:
            start = time.perf_counter()
            lg.assign_epoch_start_offset(epoch)
            if sync:
                lg.epoch_cache.sync()
            worst = max(worst, time.perf_counter() - start)
        return worst

    for epoch, (what, sync) in enumerate([("rename only (the broker)", False), ("fsync per change", True)]):
        worst = [0.0]
        seconds = _timed(lambda: worst.__setitem__(0, assign_all(epoch + 1, sync)))
        print(f"epoch assignment of {partitions} partitions, {what:<24} {seconds * 1000:8.0f} ms "
              f"({seconds / partitions * 1e6:6.0f} us each, worst {worst[0] * 1000:.1f} ms)")
    assign_all(len(logs) + 10, False)
    seconds = _timed(lambda: [lg.epoch_cache.sync() for lg in logs])
    print(f"syncing those checkpoints at the next flush:               {seconds * 1000:8.0f} ms")
    for lg in logs:
        lg.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--megabytes", type=int, default=512, help="data appended per case")
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    parser.add_argument("--epochs", type=int, default=0, metavar="N",
                        help="measure leader epoch checkpoint writes of N partitions instead")
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="kafka-ha-bench-", dir=args.dir)
    if args.epochs:
        try:
            bench_epoch_assignments(root, args.epochs)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    total = args.megabytes * MB
    kib = [Record(None, os.urandom(1024)) for _ in range(16)]
    try:
        v2 = bench_appends(root, build_v2_batch(kib), total, "v2-16x1KiB")
        bench_appends(root, build_v2_batch(kib, compression="gzip"), total // 4, "v2-gzip").close()
        bench_appends(root, build_legacy_message_set(kib, magic=1), total // 4, "v1-plain-16x1KiB").close()
        bench_appends(root, build_legacy_message_set(kib, magic=1, compression="gzip"),
                      total // 8, "v1-gzip-16x1KiB").close()
        bench_appends(root, build_legacy_message_set(kib, magic=0, compression="gzip"),
                      total // 16, "v0-gzip-16x1KiB").close()
        for max_bytes in (1 << 20, 64 << 10):
            plan = fetch_plan(v2, max_bytes)
            bench_reads(v2, plan, max_bytes, copy=True)
            bench_reads(v2, plan, max_bytes, copy=False)
        bench_follower(root, fetch_plan(v2, 1 << 20), 1 << 20)
        v2.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
