"""Hostile clients against a real broker process: what they may cost it.

Each test is one attack from the fuzz review, measured on the broker's own process
(its resident memory from /proc), never by timing.
"""

import socket
import struct
from pathlib import Path

import pytest

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.framing import decode_response, encode_request
from kafka_ha.tools.processes import HOST

pytestmark = pytest.mark.system

MB = 1024 * 1024


def rss_bytes(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def api_versions(port):
    """One ApiVersions round trip: the broker still serves."""
    with socket.create_connection((HOST, port), timeout=10) as sock:
        sock.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, "probe", {}))
        size = struct.unpack(">i", _recv(sock, 4))[0]
        return decode_response(ApiKey.API_VERSIONS, 0, _recv(sock, size))[1]


def _recv(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


def test_stalled_frames_claiming_100_mb_cost_no_memory(cluster_factory):
    """Sixteen connections each claim a 100 MB frame and send ten bytes of it: the
    broker allocates as bytes arrive, so its memory stays where it was."""
    cluster = cluster_factory(brokers=1)
    port, pid = cluster.port(1), cluster.broker_pid(1)
    assert api_versions(port)["error_code"] == 0
    before = rss_bytes(pid)
    stalled = []
    try:
        for _ in range(16):
            sock = socket.create_connection((HOST, port), timeout=10)
            sock.sendall(struct.pack(">i", 100 * MB) + b"\x00" * 10)
            stalled.append(sock)
        # Small requests never queue for the pool: the broker still answers.
        assert api_versions(port)["error_code"] == 0
        grown = rss_bytes(pid) - before
        assert grown < 64 * MB, f"broker grew by {grown / MB:.0f} MB for 16 stalled frames"
    finally:
        for sock in stalled:
            sock.close()
