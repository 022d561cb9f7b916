"""Fetch responses sent with sendfile: FileRegions, the parts encoder and the server."""
from __future__ import annotations

import logging
import os

import gevent
import pytest
from gevent import socket

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.file_region import (SENDFILE_MIN_BYTES, FileRegions, ShortFileRegion,
                                           fetch_payload)
from kafka_ha.protocol.framing import (decode_request_body, decode_response, encode_request,
                                       encode_response, encode_response_parts)
from kafka_ha.protocol.server import ProtocolServer


class Slice:
    """What the log hands out (kafka_ha.log.segment.FileSlice), minus what we don't need."""

    def __init__(self, fileno: int, position: int, length: int) -> None:
        self.fileno, self.position, self.length = fileno, position, length


@pytest.fixture
def data_file(tmp_path):
    """A 3 MiB file of a known pattern, open read-only; yields (fd, bytes)."""
    data = os.urandom(3 << 20)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    yield fd, data, path
    os.close(fd)


def fetch_body(records) -> dict:
    return {"throttle_time_ms": 0, "responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 7, "records": records},
        {"partition_index": 1, "error_code": 0, "high_watermark": 0, "records": b""}]}]}


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_regions_survive_the_segment_closing_its_fd(data_file):
    fd, data, path = data_file
    own = os.dup(fd)
    regions = FileRegions.pin([Slice(own, 10, 100), Slice(own, 5000, 0), Slice(own, 2000, 50)])
    os.close(own)              # the segment is closed (retention, deletion) ...
    os.unlink(path)            # ... and its file removed: the pinned bytes are still there
    assert len(regions) == 150
    assert regions.read() == data[10:110] + data[2000:2050]
    before = open_fds()
    regions.close()
    assert open_fds() == before - 2            # one dup per non-empty range
    regions.close()                            # idempotent


def test_small_reads_are_copied_large_ones_pinned(data_file):
    fd, data, _ = data_file
    small = fetch_payload([Slice(fd, 0, 100), Slice(fd, 200, SENDFILE_MIN_BYTES - 101)])
    assert small == data[:100] + data[200:200 + SENDFILE_MIN_BYTES - 101]
    large = fetch_payload([Slice(fd, 0, SENDFILE_MIN_BYTES)])
    assert isinstance(large, FileRegions) and large.read() == data[:SENDFILE_MIN_BYTES]
    large.close()
    assert fetch_payload([]) == b""


def test_parts_encode_the_same_frame_as_bytes(data_file):
    fd, data, _ = data_file
    regions = FileRegions.pin([Slice(fd, 0, 40000), Slice(fd, 100000, 30000)])
    parts = encode_response_parts(5, ApiKey.FETCH, 3, fetch_body(regions))
    assert [type(p).__name__ for p in parts] == ["bytearray", "FileRegions", "bytearray"]
    joined = b"".join(p.read() if isinstance(p, FileRegions) else p for p in parts)
    assert joined == encode_response(5, ApiKey.FETCH, 3, fetch_body(data[:40000] + data[100000:130000]))
    cid, body = decode_response(ApiKey.FETCH, 3, joined[4:])
    assert cid == 5 and bytes(body["responses"][0]["partitions"][0]["records"]) == regions.read()
    regions.close()


# -- through a live server --------------------------------------------------------

@pytest.fixture
def fetch_server(data_file):
    """Answers Fetch v3 for partition 0 with ``length`` bytes at ``position`` of the file."""
    fd, data, path = data_file

    def handler(header, reader):
        body = decode_request_body(header, reader)
        p = body["topics"][0]["partitions"][0]
        regions = FileRegions.pin([Slice(fd, p["fetch_offset"], p["partition_max_bytes"])])
        if body["topics"][0]["topic"] == "truncate-me":
            os.truncate(path, p["fetch_offset"] + 1000)   # a follower truncating its log
        return fetch_body(regions), header.api_version

    srv = ProtocolServer("127.0.0.1", 0, handler, logger=logging.getLogger("test.file_region"))
    srv.start()
    with gevent.Timeout(20):
        yield srv, data
    srv.stop(timeout=0.2)


def fetch_request(topic: str, position: int, length: int, correlation_id: int = 1) -> bytes:
    return encode_request(ApiKey.FETCH, 3, correlation_id, "test", {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": length,
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "fetch_offset": position, "partition_max_bytes": length}]}]})


def recv_exactly(sock, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 16))
        if not chunk:
            raise EOFError(f"EOF after {got} of {n} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def test_send_to_waits_for_a_full_socket_buffer(data_file):
    fd, data, _ = data_file
    sender, receiver = socket.socketpair()
    sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)   # sendfile must hit EAGAIN
    regions = FileRegions.pin([Slice(fd, 100, 1 << 20), Slice(fd, 2 << 20, 1000)])

    def read_slowly():
        chunks = []
        while sum(map(len, chunks)) < regions.length:
            gevent.sleep(0.001)
            chunks.append(receiver.recv(8192))
        return b"".join(chunks)

    reader = gevent.spawn(read_slowly)
    with gevent.Timeout(20):
        regions.send_to(sender)
        assert reader.get() == data[100:100 + (1 << 20)] + data[2 << 20:(2 << 20) + 1000]
    regions.close()
    sender.close()
    receiver.close()


def test_server_sends_regions_with_sendfile(fetch_server):
    srv, data = fetch_server
    sock = socket.create_connection(("127.0.0.1", srv.server_port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    sock.sendall(fetch_request("t", 12345, 2 << 20, 1) + fetch_request("t", 7, 20000, 2))
    for cid, position, length in ((1, 12345, 2 << 20), (2, 7, 20000)):
        size = int.from_bytes(recv_exactly(sock, 4), "big")
        got_cid, body = decode_response(ApiKey.FETCH, 3, recv_exactly(sock, size))
        partitions = body["responses"][0]["partitions"]
        assert got_cid == cid
        assert bytes(partitions[0]["records"]) == data[position:position + length]
        assert partitions[1] == {"partition_index": 1, "error_code": 0, "high_watermark": 0,
                                 "records": b""}
    sock.close()


def test_truncation_during_send_closes_only_that_connection(fetch_server, caplog):
    srv, data = fetch_server
    bad = socket.create_connection(("127.0.0.1", srv.server_port))
    bad.sendall(fetch_request("truncate-me", 5000, 1 << 20))
    size = int.from_bytes(recv_exactly(bad, 4), "big")
    with pytest.raises((EOFError, ConnectionResetError)):
        recv_exactly(bad, size)                 # the promised bytes never all arrive
    assert any("log truncated while its response was sent" in r.getMessage()
               for r in caplog.records)
    good = socket.create_connection(("127.0.0.1", srv.server_port))
    good.sendall(fetch_request("t", 0, 2000))
    size = int.from_bytes(recv_exactly(good, 4), "big")
    _, body = decode_response(ApiKey.FETCH, 3, recv_exactly(good, size))
    assert bytes(body["responses"][0]["partitions"][0]["records"]) == data[:2000]
    bad.close()
    good.close()


def test_short_region_read_raises(data_file):
    fd, data, _ = data_file
    regions = FileRegions.pin([Slice(fd, len(data) - 10, 20)])
    with pytest.raises(ShortFileRegion, match="10 bytes early"):
        regions.read()
    regions.close()


def test_without_descriptors_to_spare_a_large_read_is_copied(data_file, monkeypatch):
    import errno

    fd, data, _ = data_file

    def no_fds(_fd):
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(os, "dup", no_fds)
    payload = fetch_payload([Slice(fd, 10, SENDFILE_MIN_BYTES * 2)])
    assert payload == data[10:10 + SENDFILE_MIN_BYTES * 2]
