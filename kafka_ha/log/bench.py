"""Throughput of the log data path, in process (not a test): ``python -m kafka_ha.log.bench``.

Measures leader appends (offset assignment + write), follower appends (CRC +
contiguity + write) and consumer reads (locating whole entries, then
``os.pread`` of the slices, i.e. what a non-sendfile network path costs).
Writes go to the page cache: the numbers exclude fsync, as the data path does.

The baselines, in the same run: the same chunks written to a plain file, and that
file read back with ``os.pread`` in chunks of the fetch size.

``--epochs N`` instead measures what a LeaderAndIsr for N partitions costs in
leader-epoch-checkpoint writes: one epoch assignment per partition with its
file written at once (an atomic rename, no fsync; the broker now defers these
writes to one pass after the request, see kafka_ha.tools.leader_and_isr_bench),
the same with an fsync per change, and the later sync when the logs are flushed.

Results go to bench-results/log.json (or log-epochs.json), see kafka_ha/bench_results.py.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from kafka_ha.bench_results import Run, Table, add_output_options, default_path, print_summary, ratio
from kafka_ha.model import TopicPartition
from kafka_ha.records import Record, build_legacy_message_set, build_v2_batch, iter_entries

from .config import LogConfig
from .log import Log

MB = 1_000_000


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _report(rows: list[dict], name: str, nbytes: int, seconds: float, ops: int) -> None:
    print(f"{name:<46} {nbytes / MB / seconds:9.1f} MB/s {ops / seconds:11,.0f} ops/s "
          f"({nbytes / MB:.0f} MB in {seconds:.2f} s)")
    rows.append({"case": name, "bytes": nbytes, "seconds": seconds, "ops": ops,
                 "mb_s": nbytes / MB / seconds, "ops_s": ops / seconds})


def bench_plain_writes(root: str, payload: bytes, total_bytes: int, rows: list[dict]) -> str:
    """The baseline for appends: the same chunks written to a plain file (page cache, no fsync)."""
    path = os.path.join(root, "plain.bin")
    n = max(1, total_bytes // len(payload))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        seconds = _timed(lambda: [os.write(fd, payload) for _ in range(n)])
    finally:
        os.close(fd)
    _report(rows, f"baseline: plain file write, {len(payload)} B chunks", n * len(payload), seconds, n)
    return path


def bench_plain_reads(path: str, max_bytes: int, rows: list[dict]) -> None:
    """The baseline for reads: ``os.pread`` of a plain file in chunks of the fetch size."""
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)

    def run():
        for position in range(0, size, max_bytes):
            os.pread(fd, max_bytes, position)     # dropped at once, as the consumer bench does
    try:
        # Untimed: the first free of a chunk this large raises glibc's mmap threshold, after
        # which the buffers come from the heap, as they do for the log reads that follow.
        os.pread(fd, max_bytes, 0)
        seconds = _timed(run)
    finally:
        os.close(fd)
    _report(rows, f"baseline: plain pread, {max_bytes >> 10} KiB", size, seconds,
            -(-size // max_bytes))


def bench_appends(root: str, payload: bytes, total_bytes: int, name: str, rows: list[dict]) -> Log:
    log = Log(os.path.join(root, f"{name}-0"), TopicPartition(name, 0), LogConfig())
    n = max(1, total_bytes // len(payload))
    seconds = _timed(lambda: [log.append_as_leader(payload, 1) for _ in range(n)])
    _report(rows, f"leader append, {name}", n * len(payload), seconds, n)
    return log


def fetch_plan(log: Log, max_bytes: int) -> list[tuple[int, bytes]]:
    """The ``(fetch offset, data)`` sequence of a consumer reading the whole log."""
    plan, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes).to_bytes()
        plan.append((offset, data))
        offset = list(iter_entries(data))[-1].last_offset + 1
    return plan


def bench_follower(root: str, plan: list[tuple[int, bytes]], fetch_bytes: int,
                   rows: list[dict]) -> None:
    follower = Log(os.path.join(root, "follower-0"), TopicPartition("follower", 0), LogConfig())
    seconds = _timed(lambda: [follower.append_as_follower(data) for _, data in plan])
    _report(rows, f"follower append, {fetch_bytes >> 10} KiB fetches", sum(len(d) for _, d in plan),
            seconds, len(plan))
    follower.close()


def bench_reads(log: Log, plan: list[tuple[int, bytes]], max_bytes: int, copy: bool,
                rows: list[dict]) -> None:
    def run():
        for offset, _ in plan:
            for piece in log.read(offset, max_bytes).slices:
                if copy:
                    os.pread(piece.fileno, piece.length, piece.position)
    seconds = _timed(run)
    what = "read + pread" if copy else "read, slices only (sendfile path)"
    _report(rows, f"consumer {what}, {max_bytes >> 10} KiB", sum(len(d) for _, d in plan), seconds,
            len(plan))


def bench_epoch_assignments(root: str, partitions: int) -> dict:
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

    result: dict = {"partitions": partitions}
    for epoch, (key, what, sync) in enumerate([("rename", "rename only (the broker)", False),
                                               ("fsync", "fsync per change", True)]):
        worst = [0.0]
        seconds = _timed(lambda: worst.__setitem__(0, assign_all(epoch + 1, sync)))
        print(f"epoch assignment of {partitions} partitions, {what:<24} {seconds * 1000:8.0f} ms "
              f"({seconds / partitions * 1e6:6.0f} us each, worst {worst[0] * 1000:.1f} ms)")
        result.update({f"{key}_ms": seconds * 1000, f"{key}_worst_ms": worst[0] * 1000})
    assign_all(len(logs) + 10, False)
    seconds = _timed(lambda: [lg.epoch_cache.sync() for lg in logs])
    print(f"syncing those checkpoints at the next flush:               {seconds * 1000:8.0f} ms")
    result["later_sync_ms"] = seconds * 1000
    for lg in logs:
        lg.close()
    return result


THROUGHPUT_METHOD = (
    "In one process, on a temporary directory (writes go to the page cache, no fsync, as the data "
    "path does): leader appends (offset assignment and write) of batches of 16 x 1 KiB records in "
    "each message format, {mb} MB for v2 and less for the others; follower appends (CRC, "
    "contiguity, write) of the fetch responses a consumer would get; consumer reads (locating "
    "whole entries, then os.pread of the slices, or the slices alone as the sendfile path uses "
    "them). Baselines in the same run: the same chunks written to a plain file with os.write, "
    "and that file read back with os.pread in chunks of the fetch size.")
EPOCHS_METHOD = (
    "In one process: what a LeaderAndIsr for {n} partitions costs in leader-epoch checkpoint "
    "writes, one epoch assignment per partition as the broker does it (temporary file and atomic "
    "rename, no fsync); the baseline, in the same run, is the same with an fsync per change; then "
    "the later sync of all those checkpoints when the logs are flushed.")


def throughput_ratios(rows: list[dict]) -> list[dict]:
    """Leader appends against the plain write of the same chunks, reads against the plain
    pread of the same size (follower appends write whole fetches: another chunk size)."""
    by_case = {r["case"]: r for r in rows}
    write = next(r for r in rows if r["case"].startswith("baseline: plain file write"))
    out = [ratio(case, by_case[case]["mb_s"], "plain file write, same chunks", write["mb_s"], "MB/s")
           for case in ("leader append, v2-16x1KiB", "leader append, v1-plain-16x1KiB") if case in by_case]
    for kib in (1024, 64):
        case, read = f"consumer read + pread, {kib} KiB", by_case.get(f"baseline: plain pread, {kib} KiB")
        if case in by_case and read:
            out.append(ratio(case, by_case[case]["mb_s"], f"plain pread, {kib} KiB", read["mb_s"], "MB/s"))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kafka_ha.log.bench", description=__doc__)
    parser.add_argument("--megabytes", type=int, default=512, help="data appended per case")
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    parser.add_argument("--epochs", type=int, default=0, metavar="N",
                        help="measure leader epoch checkpoint writes of N partitions instead "
                             "(results in bench-results/log-epochs.json)")
    add_output_options(parser, None)
    args = parser.parse_args(argv)
    if args.epochs:
        epochs(args, Run("log-epochs", "Log: leader-epoch checkpoints written by a LeaderAndIsr",
                         parser.prog, argv), args.json or default_path("log-epochs"))
    else:
        throughput(args, Run("log", "Log: append and read throughput, in process", parser.prog, argv),
                   args.json or default_path("log"))


def epochs(args: argparse.Namespace, run: Run, path) -> None:
    root = tempfile.mkdtemp(prefix="kafka-ha-bench-", dir=args.dir)
    try:
        result = bench_epoch_assignments(root, args.epochs)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    table = Table(f"Epoch assignment of {args.epochs} partitions",
                  [("how", "", 0), ("all partitions", "ms", 0), ("each", "us", 0), ("worst", "ms", 1)],
                  [[what, result[f"{key}_ms"], 1000 * result[f"{key}_ms"] / args.epochs,
                    result[f"{key}_worst_ms"]]
                   for key, what in (("rename", "rename only (the broker)"),
                                     ("fsync", "fsync per change"))]
                  + [["syncing them at the next flush", result["later_sync_ms"], None, None]])
    data = run.write(path, method=EPOCHS_METHOD.format(n=args.epochs), results=result,
                     ratios=[ratio(f"epoch checkpoints of {args.epochs} partitions, rename only",
                                   result["rename_ms"], "the same with an fsync per change",
                                   result["fsync_ms"], "ms")],
                     tables=[table], note=args.note)
    print_summary(data, path)


def throughput(args: argparse.Namespace, run: Run, path) -> None:
    root = tempfile.mkdtemp(prefix="kafka-ha-bench-", dir=args.dir)
    total = args.megabytes * MB
    kib = [Record(None, os.urandom(1024)) for _ in range(16)]
    rows: list[dict] = []
    try:
        v2_batch = build_v2_batch(kib)
        plain = bench_plain_writes(root, v2_batch, total, rows)
        v2 = bench_appends(root, v2_batch, total, "v2-16x1KiB", rows)
        bench_appends(root, build_v2_batch(kib, compression="gzip"), total // 4, "v2-gzip", rows).close()
        bench_appends(root, build_legacy_message_set(kib, magic=1), total // 4, "v1-plain-16x1KiB",
                      rows).close()
        bench_appends(root, build_legacy_message_set(kib, magic=1, compression="gzip"),
                      total // 8, "v1-gzip-16x1KiB", rows).close()
        bench_appends(root, build_legacy_message_set(kib, magic=0, compression="gzip"),
                      total // 16, "v0-gzip-16x1KiB", rows).close()
        for max_bytes in (1 << 20, 64 << 10):
            plan = fetch_plan(v2, max_bytes)
            bench_plain_reads(plain, max_bytes, rows)
            bench_reads(v2, plan, max_bytes, copy=True, rows=rows)
            bench_reads(v2, plan, max_bytes, copy=False, rows=rows)
        bench_follower(root, fetch_plan(v2, 1 << 20), 1 << 20, rows)
        v2.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    table = Table("Log data path, in process",
                  [("case", "", 0), ("MB/s", "", 1), ("ops/s", "", 0), ("MB", "", 0), ("time", "s", 2)],
                  [[r["case"], r["mb_s"], r["ops_s"], r["bytes"] / MB, r["seconds"]] for r in rows])
    data = run.write(path, method=THROUGHPUT_METHOD.format(mb=args.megabytes), results={"rows": rows},
                     ratios=throughput_ratios(rows), tables=[table], note=args.note)
    print_summary(data, path)


if __name__ == "__main__":
    main()
