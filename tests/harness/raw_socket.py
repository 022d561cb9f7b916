"""Talking to a protocol server over a plain socket, byte by byte, as the server tests do."""
from __future__ import annotations

import contextlib
import logging
import struct

import gevent
from gevent import socket

from kafka_ha.protocol.server import ProtocolServer


def raw_connect(srv: ProtocolServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", srv.server_port), timeout=2)
    return sock


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError(f"EOF after {len(data)} of {n} bytes")
        data += chunk
    return data


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    return recv_exactly(sock, size)


def assert_closed_by_peer(sock: socket.socket) -> None:
    try:
        assert sock.recv(1) == b""
    except ConnectionResetError:
        pass


@contextlib.contextmanager
def serving(handler, timeout_s=5):
    """A live server with ``handler``, stopped on the way out; the block may take ``timeout_s``."""
    srv = ProtocolServer("127.0.0.1", 0, handler, logger=logging.getLogger("test.protocol.server"))
    srv.start()
    try:
        with gevent.Timeout(timeout_s):
            yield srv
    finally:
        srv.stop(timeout=0.2)
