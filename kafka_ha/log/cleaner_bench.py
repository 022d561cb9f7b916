"""Log cleaner throughput, in process (not a test): ``python -m kafka_ha.log.cleaner_bench``.

Appends ``--updates`` records over ``--keys`` keys (batches of 100 records, 100-byte
values, as a producer batches them) to a compacted log, then times one cleaning pass
over it (offset map, cleaned copies fsynced, swaps) without an IO limit.  The baseline,
in the same run: the same segment files copied with read + write + fsync, in 1 MiB
chunks, which is what a cleaner that removed nothing would at least have to do.

Results go to bench-results/cleaner.json, see kafka_ha/bench_results.py.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from kafka_ha.bench_results import Run, Table, add_output_options, print_summary, ratio
from kafka_ha.model import TopicPartition
from kafka_ha.records import Record, build_v2_batch, decode_records

from .cleaner import Throttler, clean_log
from .config import LogConfig
from .log import Log

MB = 1_000_000
CHUNK = 1 << 20
METHOD = ("In one process, on a temporary directory: {updates:,} updates over {keys:,} keys, in "
          "batches of 100 records with 100-byte values, appended to a compacted log with "
          "{segment_mb} MB segments; then one cleaning pass (offset map over the dirty section, "
          "every closed segment rewritten, fsynced and swapped in) without an IO limit, timed. "
          "Cleaner MB/s counts the bytes of the segments it cleaned. Baseline in the same run: "
          "the same segment files copied with read + write + fsync in 1 MiB chunks.")


def fill(lg: Log, updates: int, keys: int) -> None:
    value = b"v" * 100
    for start in range(0, updates, 100):
        batch = [Record(b"key-%08d" % ((start + i) % keys), value, 1000)
                 for i in range(min(100, updates - start))]
        lg.append_as_leader(build_v2_batch(batch, timestamp_ms=1000), 0)


def copy_segments(paths: list[str], target_dir: str) -> int:
    """The baseline: copy each file with read + write + fsync; returns the bytes copied."""
    copied = 0
    for path in paths:
        with open(path, "rb") as src, open(os.path.join(target_dir, os.path.basename(path)), "wb") as dst:
            while chunk := src.read(CHUNK):
                dst.write(chunk)
                copied += len(chunk)
            dst.flush()
            os.fsync(dst.fileno())
    return copied


def count_records(lg: Log, end: int | None = None) -> int:
    """Records in ``[log start, end)`` (default: the whole log)."""
    end = lg.log_end_offset if end is None else end
    total, offset = 0, lg.log_start_offset
    while offset < end:
        data = lg.read(offset, 16 * MB).to_bytes()
        records = [r for r in decode_records(data, offset) if r.offset < end]
        if not records:
            break
        total += len(records)
        offset = records[-1].offset + 1
    return total


def run_bench(root: str, updates: int, keys: int, segment_mb: int) -> dict:
    lg = Log(os.path.join(root, "bench-0"), TopicPartition("bench", 0),
             LogConfig(segment_bytes=segment_mb * MB, cleanup_policy="compact"))
    try:
        fill(lg, updates, keys)
        closed = lg.segments()[:-1]
        closed_bytes = sum(s.size for s in closed)
        copy_dir = os.path.join(root, "copy")
        os.makedirs(copy_dir)
        start = time.perf_counter()
        copied = copy_segments([s.log_path for s in closed], copy_dir)
        copy_s = time.perf_counter() - start
        shutil.rmtree(copy_dir)
        records_before = count_records(lg)
        start = time.perf_counter()
        result = clean_log(lg, 0, lg.log_end_offset, 10**13, 10**9, Throttler(float("inf")))
        clean_s = time.perf_counter() - start
        return {"updates": updates, "keys": keys, "segments_cleaned": len(closed),
                "cleaned_bytes": closed_bytes, "written_bytes": result.bytes_written,
                "records_before": records_before, "records_after": count_records(lg),
                "records_after_in_cleaned_segments": count_records(lg, lg.segments()[-1].base_offset),
                "clean_seconds": clean_s, "cleaner_mb_s": closed_bytes / MB / clean_s,
                "copy_bytes": copied, "copy_seconds": copy_s, "copy_mb_s": copied / MB / copy_s,
                "cleaner_records_s": records_before / clean_s}
    finally:
        lg.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kafka_ha.log.cleaner_bench", description=__doc__)
    parser.add_argument("--updates", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--segment-mb", type=int, default=16)
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    add_output_options(parser, "cleaner")
    args = parser.parse_args(argv)
    run = Run("cleaner", "Log cleaner: compaction throughput, in process", parser.prog, argv)
    root = tempfile.mkdtemp(prefix="kafka-ha-bench-", dir=args.dir)
    try:
        r = run_bench(root, args.updates, args.keys, args.segment_mb)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    table = Table("Log cleaner, one pass",
                  [("case", "", 0), ("MB/s", "", 1), ("MB", "", 0), ("time", "s", 2)],
                  [["cleaner pass", r["cleaner_mb_s"], r["cleaned_bytes"] / MB, r["clean_seconds"]],
                   ["baseline: copy + fsync", r["copy_mb_s"], r["copy_bytes"] / MB, r["copy_seconds"]]])
    print(f"cleaned {r['cleaned_bytes'] / MB:.0f} MB ({r['records_before']:,} records -> "
          f"{r['records_after']:,}, {r['records_after_in_cleaned_segments']:,} of them below the "
          f"active segment) at {r['cleaner_mb_s']:.1f} MB/s; copy + fsync {r['copy_mb_s']:.1f} MB/s")
    data = run.write(args.json, method=METHOD.format(updates=args.updates, keys=args.keys,
                                                     segment_mb=args.segment_mb),
                     results=r, ratios=[ratio("cleaner pass", r["cleaner_mb_s"], "copy + fsync",
                                              r["copy_mb_s"], "MB/s")],
                     tables=[table], note=args.note)
    print_summary(data, args.json)


if __name__ == "__main__":
    main()
