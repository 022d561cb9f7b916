"""kafka-dump-log.sh (tools/dump_log.py) on segments written by LogSegment: Kafka's
DumpLogSegments line formats for .log, .index and .timeindex files."""
import io

from kafka_ha.log.segment import LogSegment
from kafka_ha.records.builder import Record, build_legacy_message_set, build_v2_batch
from kafka_ha.records.timestamps import stamp_log_append_time
from kafka_ha.tools.dump_log import main


def dump(*argv):
    out = io.StringIO()
    assert main(list(argv), out) == 0
    return out.getvalue().splitlines()


def test_log_index_and_time_index(tmp_path):
    seg = LogSegment(str(tmp_path), 0, index_interval_bytes=100)
    first = build_v2_batch([Record(b"k", b"hello", 1000, (("a", b"1"), ("b", None))), Record(None, b"x", 1001)],
                           producer=(7, 0, 3))
    seg.append(0, 1, first, 1001)
    appended = bytearray(build_v2_batch([Record(None, None, 5)], base_offset=2, compression="gzip"))
    stamp_log_append_time(appended, 4242)
    seg.append(2, 2, appended, 4242)
    legacy = build_legacy_message_set([Record(None, b"old", 7)], magic=1, base_offset=3)
    seg.append(3, 3, legacy, 7)
    seg.flush()
    seg.close()
    with open(seg.log_path, "ab") as f:
        f.write(b"\x00" * 5)                         # a partial tail
    log_file = seg.log_path
    lines = dump("--files", log_file)
    assert lines[:2] == [f"Dumping {log_file}", "Starting offset: 0"]
    assert lines[2].startswith("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 3 lastSequence: 4 "
                               "producerId: 7 producerEpoch: 0 partitionLeaderEpoch: -1 "
                               "isTransactional: false isControl: false position: 0 CreateTime: 1001 size: ")
    assert lines[2].endswith(" magic: 2 compresscodec: NONE crc: %d isvalid: true" % int.from_bytes(first[17:21], "big"))
    assert lines[3].startswith("baseOffset: 2 lastOffset: 2 count: 1 ") and " LogAppendTime: 4242 " in lines[3]
    assert "compresscodec: GZIP" in lines[3] and lines[3].endswith("isvalid: true")
    assert lines[4].startswith(f"offset: 3 position: {len(first) + len(appended)} CreateTime: 7 size: ")
    assert lines[5] == f"Found 5 invalid bytes at the end of {seg.log_path.rsplit('/', 1)[1]}"
    assert len(lines) == 6                           # shallow: no record lines

    deep = dump("--files", log_file, "--print-data-log")
    records = [line for line in deep if line.startswith("| ")]
    assert records[0] == ("| offset: 0 CreateTime: 1000 keysize: 1 valuesize: 5 sequence: 3 "
                          "headerKeys: [a,b] key: k payload: hello")
    assert records[1] == "| offset: 1 CreateTime: 1001 keysize: -1 valuesize: 1 sequence: 4 headerKeys: [] payload: x"
    # A null value prints neither key nor payload (as Kafka's decoder parser).
    assert records[2] == "| offset: 2 LogAppendTime: 4242 keysize: -1 valuesize: -1 sequence: -1 headerKeys: []"
    assert records[3].startswith("| offset: 3 CreateTime: 7 keysize: -1 valuesize: 3 crc: ")
    assert records[3].endswith(" isvalid: true payload: old")
    assert [line for line in dump("--files", log_file, "--deep-iteration") if line.startswith("| ")][0] == \
        "| offset: 0 CreateTime: 1000 keysize: 1 valuesize: 5 sequence: 3 headerKeys: [a,b]"

    index, time_index = seg.index_path, seg.time_index_path
    lines = dump("--files", f"{index},{time_index}")
    assert lines[0] == f"Dumping {index}"
    assert lines[1:lines.index(f"Dumping {time_index}")] == [
        f"offset: {o} position: {p}" for o, p in zip(seg.index.offsets, seg.index.positions)]
    # The first append precedes any index interval; the second raised the max to 4242;
    # the third (7) did not raise it.
    assert lines[lines.index(f"Dumping {time_index}") + 1:] == ["timestamp: 4242 offset: 2"]


def test_unknown_and_missing_files(tmp_path, capsys):
    (tmp_path / "x.snapshot").write_bytes(b"")
    out = io.StringIO()
    assert main(["--files", f"{tmp_path}/x.snapshot"], out) == 0
    assert "Ignoring unknown file" in capsys.readouterr().err
    assert main(["--files", f"{tmp_path}/00000000000000000000.log"], out) == 1
    assert "Cannot dump" in capsys.readouterr().err
