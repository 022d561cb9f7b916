"""LogSegment: appends, sparse index lookups, truncation, recovery, index rebuild, full disks."""
import errno
import os
import random

import pytest

from kafka_ha.log.file_writes import PartialWriteError
from kafka_ha.log.offset_index import INDEX_ENTRY, INDEX_WRITE_BATCH
from kafka_ha.log.segment import LogSegment
from kafka_ha.records import Record, build_legacy_message_set, build_v2_batch, decode_records, iter_entries
from tests.harness.full_disk import FullDisk


def batch(base, n=4, size=300):
    return build_v2_batch([Record(None, b"%05d" % (base + i) + b"." * size, 1000 + base + i)
                           for i in range(n)], base_offset=base, partition_leader_epoch=0)


def fill(segment, batches=30, n=4):
    """Append ``batches`` v2 batches of ``n`` records: offsets 0..batches*n-1."""
    for b in range(batches):
        base = segment.base_offset + b * n
        segment.append(base, base + n - 1, batch(base, n))


def offsets(data, min_offset=0):
    return [r.offset for r in decode_records(data, min_offset)]


@pytest.fixture
def segment(tmp_path):
    seg = LogSegment(str(tmp_path), 0, index_interval_bytes=2048)
    yield seg
    seg.close()


def test_file_names_and_sparse_index(segment, tmp_path):
    fill(segment)
    segment.flush()  # index entries reach the file in batches, and at the latest on flush
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000000.index", "00000000000000000000.log",
                                            "00000000000000000000.timeindex"]
    index = (tmp_path / "00000000000000000000.index").read_bytes()
    pairs = list(INDEX_ENTRY.iter_unpack(index))
    # batches are ~1.3 KB: one index entry every second batch, once > 2048 bytes were written
    assert len(pairs) == 14 and pairs[0] == (8, 2 * len(batch(0)))
    assert segment.next_offset == 120 and segment.size == 30 * len(batch(0))


def test_read_mid_segment_uses_the_index(segment):
    fill(segment)
    sl = segment.read(61, 10_000)
    assert segment.index.lookup(61) == 14 * len(batch(0))       # indexed batch 56..59, one before 60..63
    assert sl.position == 15 * len(batch(0))
    assert sl.first_entry_offset == 60
    got = offsets(sl.read())
    assert got[0] == 60 and got[-1] == 60 + 4 * (10_000 // len(batch(0))) - 1   # whole batches only
    assert sl.length % len(batch(0)) == 0


def test_read_bounds(segment):
    fill(segment)
    one = len(batch(0))
    assert segment.read(200, 1000) is None                                 # beyond the end
    assert segment.read(0, 10).length == one                               # min one message
    partial = segment.read(0, 10, min_one_message=False)
    assert partial.length == 10                                            # cut, as Fetch v0-2
    limited = segment.read(0, 10**6, max_position=segment.position_of(10))
    assert offsets(limited.read()) == list(range(8))                       # stops before offset 10's batch
    assert segment.position_of(10) == 2 * one and segment.position_of(10**6) is None


def test_truncate_to_mid_segment_and_mid_batch(segment):
    fill(segment)
    assert segment.truncate_to(42) == 20 * len(batch(0))                   # 42 is inside batch 40..43
    assert segment.next_offset == 40 and segment.size == 10 * len(batch(0))
    assert offsets(segment.read(0, 10**6).read()) == list(range(40))
    segment.append(40, 43, batch(40))                                      # appends continue cleanly
    assert segment.read(40, 10**6).first_entry_offset == 40
    assert segment.truncate_to(0) == 11 * len(batch(0)) and segment.next_offset == 0


def test_recover_partial_tail(segment):
    fill(segment, batches=5)
    with open(segment.log_path, "ab") as f:
        f.write(batch(20)[:50])                                            # crash mid-append
    reopened = LogSegment(segment.dir, 0, 2048)
    assert reopened.tail_damaged and reopened.next_offset == 20
    assert reopened.recover(1 << 20) == 50
    assert reopened.size == 5 * len(batch(0)) and reopened.next_offset == 20
    reopened.close()


def test_recover_corrupt_tail_keeps_everything_before(segment):
    fill(segment, batches=10)
    one = len(batch(0))
    with open(segment.log_path, "r+b") as f:
        f.seek(7 * one + 100)                                              # inside batch 28..31
        byte = f.read(1)
        f.seek(7 * one + 100)
        f.write(bytes([byte[0] ^ 0xFF]))
    reopened = LogSegment(segment.dir, 0, 2048)
    assert not reopened.tail_damaged                                       # headers still parse
    assert reopened.recover(1 << 20) == 3 * one
    assert reopened.next_offset == 28
    assert offsets(reopened.read(0, 10**6).read()) == list(range(28))
    reopened.close()


# Seeded, so every run (and every xdist worker) collects the same parameters.
@pytest.mark.parametrize("garbage", [b"", b"\x01\x02\x03", random.Random(64).randbytes(64),
                                     INDEX_ENTRY.pack(5, 999999)],
                         ids=["empty", "short", "random", "past-the-end"])
def test_garbage_index_is_rebuilt(segment, garbage):
    fill(segment)
    segment.close()
    expected = open(segment.index_path, "rb").read()
    with open(segment.index_path, "wb") as f:
        f.write(garbage)
    reopened = LogSegment(segment.dir, 0, 2048)
    assert open(reopened.index_path, "rb").read() == expected
    assert reopened.next_offset == 120 and not reopened.tail_damaged
    assert offsets(reopened.read(77, 2000).read())[0] == 76
    reopened.close()


def test_missing_index_is_rebuilt(segment):
    fill(segment)
    segment.close()
    os.unlink(segment.index_path)
    reopened = LogSegment(segment.dir, 0, 2048)
    assert reopened.index.offsets == segment.index.offsets and reopened.next_offset == 120
    reopened.close()


def test_legacy_compressed_entries_are_indexed_by_their_first_offset(tmp_path):
    from kafka_ha.records.validate import assign_offsets
    seg = LogSegment(str(tmp_path), 100, index_interval_bytes=0)
    next_offset = 100
    for _ in range(5):
        a = assign_offsets(build_legacy_message_set([Record(None, b"x" * 50)] * 3, magic=1,
                                                    compression="gzip"), next_offset, 0, 1 << 20)
        seg.append(a.first_offset, a.last_offset, a.buffer)
        next_offset = a.last_offset + 1
    assert seg.index.offsets == [103, 106, 109, 112]
    assert offsets(seg.read(107, 10**6).read(), 107)[:2] == [107, 108]
    seg.close()
    rebuilt = LogSegment(str(tmp_path), 100, index_interval_bytes=0)
    os.unlink(rebuilt.index_path)
    rebuilt.close()
    rebuilt = LogSegment(str(tmp_path), 100, index_interval_bytes=0)
    assert rebuilt.index.offsets == [103, 106, 109, 112] and rebuilt.next_offset == 115
    assert rebuilt.recover(1 << 20) == 0 and rebuilt.index.offsets == [103, 106, 109, 112]
    rebuilt.close()


def test_append_rejects_going_backwards(segment):
    fill(segment, batches=1)
    with pytest.raises(ValueError):
        segment.append(2, 5, batch(2))


def test_headers_skip_large_entries_without_reading_them(segment):
    big = build_v2_batch([Record(None, b"y" * 100_000)], base_offset=0)
    segment.append(0, 0, big)
    segment.append(1, 4, batch(1))
    assert [e.first_offset for e in segment.headers()] == [0, 1]
    assert [e.first_offset for e in iter_entries(segment.read(0, 10**6).read())] == [0, 1]


def _reads(seg):
    """Every read a fetch can make of ``seg``: (start, max_bytes, max_position, min_one, cut)."""
    out = []
    offsets_and_ends = [(e.last_offset, e.end) for e in seg.headers()]
    positions = [None] + [end for _, end in offsets_and_ends[-6:]] + [seg.size // 2]
    for start in range(seg.base_offset, seg.next_offset + 1):
        for max_bytes in (1, 200, 1500, 4000, 1 << 20):
            for max_position in positions:
                for min_one, cut in ((True, True), (False, True), (False, False)):
                    sl = seg.read(start, max_bytes, max_position, min_one, cut)
                    out.append(None if sl is None else (sl.position, sl.length, sl.first_entry_offset))
    return out + [seg.position_of(o) for o in range(seg.base_offset, seg.next_offset + 2)]


@pytest.mark.parametrize("index_interval, tail_entries", [(2048, 256), (1 << 20, 256), (1 << 20, 3)])
def test_reads_near_the_tail_match_a_segment_that_knows_only_its_index(tmp_path, monkeypatch,
                                                                        index_interval, tail_entries):
    # The appending segment keeps an in-memory index of its recent appends; one
    # opened afresh on the same file has only the sparse index and scans.  Both
    # must answer every read alike, whether appends hold one entry or several
    # (a follower appends what a fetch returned), across index entries,
    # after truncation, and when the recent list overflows.
    monkeypatch.setattr("kafka_ha.log.offset_index.TAIL_ENTRIES", tail_entries)
    live = LogSegment(str(tmp_path), 0, index_interval_bytes=index_interval)
    sizes = [1, 3, 1, 1, 2, 4, 1, 1, 1, 5, 1, 2]
    base = 0
    for k, count in enumerate(sizes):
        chunk = b"".join(batch(base + 2 * j, n=2, size=100 + 150 * (k % 3)) for j in range(count))
        live.append(base, base + 2 * count - 1, chunk)
        base += 2 * count
    live.flush()

    def check():
        # The recent appends are entry starts of this file, in order.
        starts = {e.position: e.first_offset for e in live.headers()}
        recent = list(zip(live.index.recent_positions, live.index.recent_offsets))
        assert recent == sorted(recent) and all(starts.get(p) == o for p, o in recent)
        fresh = LogSegment(str(tmp_path), 0, index_interval_bytes=index_interval)
        try:
            assert fresh.index.recent_offsets == []
            assert _reads(live) == _reads(fresh)
        finally:
            fresh.close()

    assert live.index.recent_offsets                     # the fast path is what is compared
    check()
    live.truncate_to(base - 13)                     # inside a multi-batch append, 3 appends back
    check()
    for _ in range(2):
        live.append(live.next_offset, live.next_offset + 1, batch(live.next_offset, n=2, size=50))
    live.flush()
    check()
    live.close()


# --- a full disk ---------------------------------------------------------------------------


def _state(seg):
    """Everything an append changes, in memory and in the .log file."""
    with open(seg.log_path, "rb") as f:
        data = f.read()
    return (seg.size, seg.next_offset, seg.largest_timestamp, list(seg.index.offsets), list(seg.index.positions),
            list(seg.index.recent_offsets), list(seg.index.recent_positions), bytes(seg.index.unwritten),
            seg.index.bytes_since_entry, data)


@pytest.mark.parametrize("room", [0, 100], ids=["nothing-written", "short-write"])
def test_an_append_the_disk_cannot_hold_leaves_the_segment_as_it_was(segment, monkeypatch, room):
    fill(segment, batches=10)
    before, reads = _state(segment), _reads(segment)
    with monkeypatch.context() as m:
        m.setattr(os, "write", FullDisk(segment.dir, room))
        with pytest.raises(OSError) as failed:
            segment.append(40, 43, batch(40))        # would also add an index entry
    assert failed.value.errno == errno.ENOSPC
    assert _state(segment) == before and _reads(segment) == reads and not segment.tail_damaged
    segment.append(40, 43, batch(40))                # the same append, with room again
    assert offsets(segment.read(36, 10**6).read(), 36) == list(range(36, 44))
    reopened = LogSegment(segment.dir, 0, 2048)
    assert reopened.next_offset == 44 and not reopened.tail_damaged
    reopened.close()


def test_a_partial_write_that_cannot_be_cut_off_stops_appends_until_recovery(segment, monkeypatch):
    fill(segment, batches=5)
    size = segment.size

    def failing_ftruncate(fd, length):
        raise OSError(errno.EIO, os.strerror(errno.EIO))
    with monkeypatch.context() as m:
        m.setattr(os, "write", FullDisk(segment.dir, 100))
        m.setattr(os, "ftruncate", failing_ftruncate)
        with pytest.raises(PartialWriteError) as failed:
            segment.append(20, 23, batch(20))
    assert failed.value.errno == errno.ENOSPC
    assert f"cutting the partial write back to {size} bytes failed too" in str(failed.value)
    assert segment.tail_damaged and segment.size == size and segment.next_offset == 20
    assert offsets(segment.read(0, 10**6).read()) == list(range(20))   # the 100 bytes are not served
    with pytest.raises(OSError, match="takes no appends until it is recovered"):
        segment.append(20, 23, batch(20))
    reopened = LogSegment(segment.dir, 0, 2048)
    assert reopened.tail_damaged and reopened.recover(1 << 20) == 100
    reopened.append(20, 23, batch(20))
    assert offsets(reopened.read(16, 10**6).read(), 16) == list(range(16, 24))
    reopened.close()


def test_an_index_write_the_disk_cannot_hold_fails_after_the_entries_are_appended(tmp_path, monkeypatch):
    seg = LogSegment(str(tmp_path), 0, index_interval_bytes=0)   # an index entry for every append but the first
    fill(seg, batches=INDEX_WRITE_BATCH)                          # one entry short of a batch write
    assert os.path.getsize(seg.index_path) == 0
    with monkeypatch.context() as m:
        m.setattr(os, "write", FullDisk(tmp_path, 20, suffix=".index"))
        with pytest.raises(OSError) as failed:
            seg.append(64, 67, batch(64))
    assert failed.value.errno == errno.ENOSPC
    assert seg.next_offset == 68 and offsets(seg.read(64, 10**6).read(), 64) == [64, 65, 66, 67]
    assert os.path.getsize(seg.index_path) == 0                   # no partial entry was left
    seg.append(68, 71, batch(68))                                 # room again: the pending entries go too
    with open(seg.index_path, "rb") as f:
        written = [(seg.base_offset + rel, pos) for rel, pos in INDEX_ENTRY.iter_unpack(f.read())]
    assert written == list(zip(seg.index.offsets, seg.index.positions)) and len(written) == INDEX_WRITE_BATCH + 1
    seg.close()
