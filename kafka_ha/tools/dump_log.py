"""kafka-dump-log.sh: print log segments and their index files (Kafka's DumpLogSegments).

Every file of ``--files`` is announced with ``Dumping <file>`` and printed by its suffix,
in Kafka's line formats:

- ``.log``: ``Starting offset: <base>``, then one line per batch (a v2 batch:
  ``baseOffset: .. lastOffset: .. count: .. baseSequence: .. lastSequence: ..
  producerId: .. producerEpoch: .. partitionLeaderEpoch: .. isTransactional: ..
  isControl: ..``; a magic 0/1 entry: ``offset: <last offset>``), each followed by
  `` position: .. <CreateTime|LogAppendTime|NoTimestampType>: <max timestamp> size: ..
  magic: .. compresscodec: .. crc: .. isvalid: ..``.  With ``--deep-iteration``
  (implied by ``--print-data-log``) every record follows as ``| offset: ..
  CreateTime: .. keysize: .. valuesize: ..`` plus ``sequence: .. headerKeys: [..]``
  (v2) or ``crc: .. isvalid: ..`` (magic 0/1); ``--print-data-log`` adds `` key: ..``
  and `` payload: ..`` (UTF-8) for records with a value.  Bytes after the last whole
  entry are reported as ``Found N invalid bytes at the end of <name>``.
- ``.index``: ``offset: <offset> position: <position>`` per entry (kafka-ha indexes
  the first offset of an append, Kafka its last: see kafka_ha.log.offset_index).
- ``.timeindex``: ``timestamp: <timestamp> offset: <offset>`` per entry.

Other files are reported on stderr and skipped.  The files are only read.
"""
from __future__ import annotations

import argparse
import mmap
import os
import struct
import sys
from typing import Iterator, TextIO

from kafka_ha.log.offset_index import INDEX_ENTRY
from kafka_ha.log.time_index import TIME_INDEX_ENTRY
from kafka_ha.records.errors import RecordsError
from kafka_ha.records.format import (CODEC_NAMES, CONTROL_MASK, CRC_OFFSET, MAGIC_V0, MAGIC_V2,
                                     TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK, V2_CRC_OFFSET)
from kafka_ha.records.reader import decode_records
from kafka_ha.records.shallow import Entry, iter_entries, validate_entry
from kafka_ha.records.validate import inner_entries

DESCRIPTION = ("This tool helps to parse a log file and dump its contents to the console, useful "
               "for debugging a seemingly corrupt log segment.")
_U32 = struct.Struct(">I")


def timestamp_type(entry: Entry) -> str:
    if entry.magic == MAGIC_V0:
        return "NoTimestampType"
    return "LogAppendTime" if entry.attributes & TIMESTAMP_TYPE_MASK else "CreateTime"


def _valid(buf, entry: Entry) -> bool:
    try:
        validate_entry(buf, entry)
        return True
    except RecordsError:
        return False


def batch_line(buf, entry: Entry) -> str:
    """The line of one log entry (Kafka's printBatchLevel).

    >>> from kafka_ha.records.builder import Record, build_v2_batch
    >>> b = build_v2_batch([Record(None, b"v")] * 2, base_offset=5, timestamp_ms=9)
    >>> batch_line(b, next(iter_entries(b)))  # doctest: +ELLIPSIS
    'baseOffset: 5 lastOffset: 6 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: -1 isTransactional: false isControl: false position: 0 CreateTime: 9 size: 77 magic: 2 compresscodec: NONE crc: ... isvalid: true'
    """
    if entry.magic == MAGIC_V2:
        base = entry.first_offset
        last_seq = entry.base_sequence + entry.last_offset - base if entry.base_sequence >= 0 else -1
        head = (f"baseOffset: {base} lastOffset: {entry.last_offset} count: {entry.record_count} "
                f"baseSequence: {entry.base_sequence} lastSequence: {last_seq} "
                f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
                f"partitionLeaderEpoch: {entry.partition_leader_epoch} "
                f"isTransactional: {_bool(entry.attributes & TRANSACTIONAL_MASK)} "
                f"isControl: {_bool(entry.attributes & CONTROL_MASK)}")
        crc = _U32.unpack_from(buf, entry.position + V2_CRC_OFFSET)[0]
    else:
        head = f"offset: {entry.last_offset}"
        crc = _U32.unpack_from(buf, entry.position + CRC_OFFSET)[0]
    codec = CODEC_NAMES.get(entry.codec, str(entry.codec)).upper()
    return (f"{head} position: {entry.position} {timestamp_type(entry)}: {entry.max_timestamp} "
            f"size: {entry.size} magic: {entry.magic} compresscodec: {codec} crc: {crc} "
            f"isvalid: {_bool(_valid(buf, entry))}")


def _bool(value) -> str:
    return "true" if value else "false"


def record_lines(buf, entry: Entry, print_data: bool) -> Iterator[str]:
    """One ``| offset: ..`` line per record of ``entry`` (Kafka's deep iteration)."""
    data = bytes(buf[entry.position:entry.end])
    ts_type = timestamp_type(entry)
    legacy = []
    if entry.magic != MAGIC_V2:
        if entry.codec:
            inner, entries = inner_entries(data, entry._replace(position=0))
            legacy = [(_U32.unpack_from(inner, e.position + CRC_OFFSET)[0], _valid(inner, e)) for e in entries]
        else:
            legacy = [(_U32.unpack_from(data, CRC_OFFSET)[0], _valid(data, entry._replace(position=0)))]
    for i, record in enumerate(decode_records(data, check_crc=False)):
        line = (f"| offset: {record.offset} {ts_type}: {record.timestamp_ms} "
                f"keysize: {_size(record.key)} valuesize: {_size(record.value)}")
        if entry.magic == MAGIC_V2:
            seq = entry.base_sequence + record.offset - entry.first_offset if entry.base_sequence >= 0 else -1
            line += f" sequence: {seq} headerKeys: [{','.join(k for k, _ in record.headers)}]"
        else:
            crc, valid = legacy[i] if i < len(legacy) else (0, False)
            line += f" crc: {crc} isvalid: {_bool(valid)}"
        if print_data and record.value is not None:
            if record.key is not None:
                line += f" key: {record.key.decode('utf-8', 'replace')}"
            line += f" payload: {record.value.decode('utf-8', 'replace')}"
        yield line


def _size(field: bytes | None) -> int:
    return -1 if field is None else len(field)


def base_offset_of(path: str) -> int:
    return int(os.path.basename(path).split(".")[0])


def dump_log(path: str, deep: bool, print_data: bool, out: TextIO) -> None:
    print(f"Starting offset: {base_offset_of(path)}", file=out)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if not size:
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            buf = memoryview(mapped)
            valid = 0
            try:
                for entry in iter_entries(buf):
                    print(batch_line(buf, entry), file=out)
                    if deep:
                        try:
                            for line in record_lines(buf, entry, print_data):
                                print(line, file=out)
                        except RecordsError as e:
                            print(f"Cannot read the records of the batch at position {entry.position}: {e}",
                                  file=sys.stderr)
                    valid = entry.end
            except RecordsError:
                pass                           # reported as invalid trailing bytes below
            finally:
                buf.release()
    if size > valid:
        print(f"Found {size - valid} invalid bytes at the end of {os.path.basename(path)}", file=out)


def dump_index(path: str, out: TextIO) -> None:
    base = base_offset_of(path)
    with open(path, "rb") as f:
        data = f.read()
    for relative, position in INDEX_ENTRY.iter_unpack(data[:len(data) - len(data) % INDEX_ENTRY.size]):
        print(f"offset: {base + relative} position: {position}", file=out)


def dump_time_index(path: str, out: TextIO) -> None:
    base = base_offset_of(path)
    with open(path, "rb") as f:
        data = f.read()
    for timestamp, relative in TIME_INDEX_ENTRY.iter_unpack(data[:len(data) - len(data) % TIME_INDEX_ENTRY.size]):
        print(f"timestamp: {timestamp} offset: {base + relative}", file=out)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kafka-dump-log.sh", description=DESCRIPTION)
    parser.add_argument("--files", required=True, metavar="<String: file1, file2, ...>",
                        help="REQUIRED: The comma separated list of data and index log files to be dumped.")
    parser.add_argument("--print-data-log", action="store_true",
                        help="if set, printing the messages content when dumping data logs. "
                             "Automatically set if any decoder option is specified.")
    parser.add_argument("--deep-iteration", action="store_true",
                        help="if set, uses deep instead of shallow iteration. Automatically set if "
                             "print-data-log is enabled.")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, out: TextIO = sys.stdout) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    status = 0
    for path in (p.strip() for p in args.files.split(",") if p.strip()):
        print(f"Dumping {path}", file=out)
        try:
            if path.endswith(".log"):
                dump_log(path, args.deep_iteration or args.print_data_log, args.print_data_log, out)
            elif path.endswith(".timeindex"):
                dump_time_index(path, out)
            elif path.endswith(".index"):
                dump_index(path, out)
            else:
                print(f"Ignoring unknown file {path}", file=sys.stderr)
        except (OSError, ValueError) as e:
            print(f"Cannot dump {path}: {e}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
