"""FrameReader and send_all against scripted sockets: every way bytes can arrive or leave."""
from __future__ import annotations

import struct
import time

import pytest

from kafka_ha.protocol.stream_io import FrameReader, FrameSizeError, TruncatedFrame, send_all


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class Stream:
    """recv_into over a byte string, handing out at most ``chunks[i]`` bytes on call i."""

    def __init__(self, data: bytes, chunks=None) -> None:
        self.data, self.pos, self.calls = data, 0, 0
        self.chunks = list(chunks or [])

    def recv_into(self, view: memoryview, nbytes: int) -> int:
        limit = self.chunks.pop(0) if self.chunks else nbytes
        n = min(nbytes, limit, len(self.data) - self.pos)
        view[:n] = self.data[self.pos:self.pos + n]
        self.pos += n
        self.calls += 1
        return n


def read_all(reader: FrameReader, stream: Stream) -> list[bytes]:
    frames = []
    while (f := reader.read(stream.recv_into)) is not None:
        frames.append(bytes(f))
    return frames


PAYLOADS = [b"a", b"", b"hello world" * 3, bytes(range(256)) * 5, b"z" * 40]


def test_small_frames_that_arrive_together_cost_one_recv_each_or_less():
    data = b"".join(frame(p) for p in PAYLOADS[:3])
    stream = Stream(data)
    assert read_all(FrameReader(0, 10_000, buffer_bytes=4096), stream) == PAYLOADS[:3]
    assert stream.calls == 2          # one receive for all three, one that sees the EOF


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 64, 300])
def test_frames_split_at_any_boundary(chunk):
    data = b"".join(frame(p) for p in PAYLOADS)
    stream = Stream(data, chunks=[chunk] * 10_000)
    assert read_all(FrameReader(0, 10_000, buffer_bytes=64), stream) == PAYLOADS


def test_a_frame_larger_than_the_buffer_is_received_into_its_own():
    big = bytes(range(256)) * 100
    data = frame(b"x") + frame(big) + frame(b"after")
    stream = Stream(data, chunks=[10, 500, 20_000, 20_000, 20_000])
    assert read_all(FrameReader(0, 100_000, buffer_bytes=16), stream) == [b"x", big, b"after"]


def test_a_size_prefix_split_at_the_end_of_the_buffer_is_moved_to_the_front():
    # 7-byte frames in a 16-byte buffer: the third prefix straddles its end.
    payloads = [b"abc", b"def", b"ghi", b"jkl"]
    stream = Stream(b"".join(frame(p) for p in payloads))
    assert read_all(FrameReader(0, 100, buffer_bytes=16), stream) == payloads


def test_frames_are_independent_buffers():
    stream = Stream(frame(b"one") + frame(b"two"))
    reader = FrameReader(0, 100)
    first = reader.read(stream.recv_into)
    view = memoryview(first)             # a handler keeps a slice of its request
    reader.read(stream.recv_into)
    assert bytes(view) == b"one"


@pytest.mark.parametrize("size", [-1, 0, 101, 2**31 - 1])
def test_sizes_outside_the_limits_are_refused_before_allocating(size):
    stream = Stream(struct.pack(">i", size) + b"rest")
    with pytest.raises(FrameSizeError) as err:
        FrameReader(1, 100).read(stream.recv_into)
    assert err.value.size == size
    assert f"frame size {size} outside 1..100" in str(err.value)


@pytest.mark.parametrize("data, got, total", [
    (b"\x00\x00", 2, 4),                          # inside the size prefix
    (frame(b"hello")[:7], 3, 5),                  # inside the body
])
def test_a_stream_that_ends_inside_a_frame_is_truncated(data, got, total):
    with pytest.raises(TruncatedFrame) as err:
        FrameReader(0, 100).read(Stream(data, chunks=[1] * 20).recv_into)
    assert (err.value.got, err.value.total) == (got, total)
    assert str(err.value) == f"EOF after {got} of {total} bytes"


def test_a_big_frame_cut_short_is_truncated():
    data = frame(b"y" * 1000)[:600]
    with pytest.raises(TruncatedFrame) as err:
        FrameReader(0, 10_000, buffer_bytes=16).read(Stream(data).recv_into)
    assert (err.value.got, err.value.total) == (596, 1000)


def test_reset_drops_what_the_old_socket_left_in_the_buffer():
    reader = FrameReader(0, 100)
    old = Stream(frame(b"mine") + frame(b"stale"))
    assert reader.read(old.recv_into) == b"mine"
    reader.reset()
    assert reader.read(Stream(frame(b"fresh")).recv_into) == b"fresh"


class Sock:
    """send() that takes at most ``limits[i]`` bytes on call i; records timeouts set."""

    def __init__(self, limits, delay: float = 0.0) -> None:
        self.limits, self.delay = list(limits), delay
        self.out, self.timeouts = bytearray(), []

    def send(self, data) -> int:
        time.sleep(self.delay)
        n = min(len(data), self.limits.pop(0))
        self.out += bytes(data[:n])
        return n

    def settimeout(self, t: float) -> None:
        self.timeouts.append(t)


def test_send_all_continues_partial_sends():
    sock = Sock([3, 1, 100])
    send_all(sock, b"hello world")
    assert sock.out == b"hello world" and sock.timeouts == []


def test_send_all_with_a_deadline_gives_each_continuation_what_is_left():
    sock = Sock([2, 2, 100])
    deadline = time.monotonic() + 5
    send_all(sock, bytearray(b"abcdef"), deadline)
    assert sock.out == b"abcdef"
    assert len(sock.timeouts) == 2 and all(0 < t <= 5 for t in sock.timeouts)
    assert sock.timeouts[0] >= sock.timeouts[1]


def test_send_all_past_its_deadline_times_out():
    sock = Sock([1] * 10, delay=0.02)
    with pytest.raises(TimeoutError):
        send_all(sock, b"abcdef", time.monotonic() + 0.03)
    assert 0 < len(sock.out) < 6


# -- memory per claimed frame ---------------------------------------------------------

def test_a_claimed_size_is_not_allocated_before_its_bytes_arrive():
    """A header claiming 50 MB followed by 10 bytes and EOF costs kilobytes, not 50 MB."""
    import tracemalloc

    claimed = 50 * 1024 * 1024
    stream = Stream(struct.pack(">i", claimed) + b"x" * 10)
    reader = FrameReader(1, 100 * 1024 * 1024)
    tracemalloc.start()
    try:
        with pytest.raises(TruncatedFrame):
            reader.read(stream.recv_into)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024, peak


def test_a_large_frame_arriving_in_pieces_is_whole_and_exact():
    payload = bytes(range(256)) * 4000          # ~1 MB, larger than every growth step
    stream = Stream(frame(payload) + frame(b"next"), chunks=[7, 70000, 3] + [123457] * 20)
    reader = FrameReader(1, 10 * 1024 * 1024)
    assert read_all(reader, stream) == [payload, b"next"]


def test_the_reservation_callback_sees_each_size_before_the_body_is_read():
    sizes = []
    stream = Stream(frame(b"abc") + frame(b"z" * 40000))

    def reserve(size):
        sizes.append((size, stream.pos))

    reader = FrameReader(1, 100000)
    assert bytes(reader.read(stream.recv_into, reserve)) == b"abc"
    assert bytes(reader.read(stream.recv_into, reserve)) == b"z" * 40000
    # the 40000-byte body had not all been received when its size was reserved
    assert sizes[0][0] == 3 and sizes[1][0] == 40000 and sizes[1][1] < 4 + 3 + 4 + 40000
