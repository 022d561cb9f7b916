"""A gevent TCP server that frames Kafka requests and hands them to a handler.

One greenlet per connection reads a frame, calls the handler, writes the
response, and only then reads the next frame.  That gives the ordering Kafka
promises (on each connection, responses leave in the order of the requests) even
when the handler blocks, e.g. on a long-polling Fetch, and it bounds memory to
one request per connection (plus the frame reader's 16 KiB receive buffer,
``stream_io``).  The exception is a handler that returns a ``DeferredResponse``
(an acks=all Produce that has appended and waits for its replicas): the
connection goes on reading and handling requests, and a writer greenlet sends
the answers in request order as each is finished (``_Answers``).  At most
``MAX_PENDING_RESPONSES`` answers wait per connection; past that the
connection is not read, as Kafka mutes a channel.  Across connections, an optional :class:`RequestMemoryPool`
bounds the bytes of all large requests being read or served: each frame larger
than a connection's receive buffer reserves its size before its body is read
and releases it once answered.

The handler contract::

    handler(header: RequestHeader, body: Reader) -> (response_body, version) | None

``body`` is positioned after the header (decode it with
``decode_request_body``); ``None`` means "send nothing" (Produce acks=0).
Only supported (key, version) pairs reach the handler: an unsupported
ApiVersions gets the KIP-511 fallback here, anything else closes the
connection, as Kafka does.
"""
from __future__ import annotations

import logging
import socket
import time
from collections import Counter, deque
from typing import Any, Callable, Optional

import gevent
from gevent.event import Event
from gevent.server import StreamServer

from kafka_ha import cooperative
from kafka_ha.protocol.api import ApiKey, api_versions_entries, is_supported
from kafka_ha.protocol.deferred import DeferredResponse
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.file_region import FileRegions, ShortFileRegion
from kafka_ha.protocol.framing import (RequestHeader, decode_request, encode_response,
                                       encode_response_parts)
from kafka_ha.protocol.memory_pool import RequestMemoryPool
from kafka_ha.protocol.primitives import ProtocolError, Reader
from kafka_ha.protocol.stream_io import (BUFFER_BYTES, FrameReader, FrameSizeError, TruncatedFrame,
                                        send_all)

Handler = Callable[[RequestHeader, Reader], Optional[tuple[dict[str, Any], int]]]

DEFAULT_MAX_REQUEST_BYTES = 104857600
# Answers queued on one connection behind one still being finished.  librdkafka sends
# a Produce per partition with up to a million in flight: with 500 here, a producer
# writing to the 3,334 partitions a controlled shutdown moved needed seven replication
# rounds one after another (acks=all writable 10.9 s after the SIGTERM, acks=1 2.0 s).
# Each queued answer is small (a Produce's offsets: about 1 KB with its bookkeeping;
# or a Fetch's file regions), so 4,096 bound a connection to a few MB.
MAX_PENDING_RESPONSES = 4096


def client_address() -> str:
    """The IP address of the client whose connection the current greenlet serves ('' in any
    other greenlet): JoinGroup records it, and DescribeGroups shows it as the member's host."""
    return getattr(gevent.getcurrent(), "kafka_client_address", "")


class _CloseConnection(Exception):
    """Internal: stop serving this connection (already logged)."""


class ProtocolServer:
    """Accepts connections on ``host:port`` and serves framed requests."""

    def __init__(self, host: str, port: int, handler: Handler,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                 logger: logging.Logger | None = None,
                 memory_pool: RequestMemoryPool | None = None,
                 idle_timeout_s: float | None = None,
                 request_read_timeout_s: float | None = None,
                 max_connections_per_ip: int | None = None) -> None:
        self.handler = handler
        self.max_request_bytes = max_request_bytes
        self.memory_pool = memory_pool or RequestMemoryPool(-1)
        # connections.max.idle.ms: a connection that sends nothing for this long is
        # closed.  A request whose size has arrived must arrive whole within the
        # (shorter) read timeout, so a client cannot hold a pool reservation, or a
        # connection, by trickling a frame.  None means no limit.
        self.idle_timeout_s = idle_timeout_s
        self.request_read_timeout_s = request_read_timeout_s
        self.max_connections_per_ip = max_connections_per_ip
        self._connections_per_ip: Counter[str] = Counter()
        self._sockets: set[Any] = set()     # the open connections, for close_connections()
        self.log = logger or logging.getLogger(__name__)
        self._server = StreamServer((host, port), self._serve_connection)

    @property
    def server_port(self) -> int:
        """The bound port (useful after binding port 0)."""
        return self._server.server_port

    def start(self) -> None:
        self._server.start()
        self.log.info("protocol server listening on %s:%d",
                      self._server.server_host, self.server_port)

    def stop(self, timeout: float | None = None) -> None:
        """Stop accepting (open connections go on being served: see close_connections)."""
        self._server.stop(timeout)

    def close_connections(self) -> None:
        """End every open connection now; answers already sent stay delivered.

        A stopping broker does this once it no longer leads anything, before its slow
        part (flushing every log holds the loop for seconds): clients then see the
        connection close and ask the other brokers, as when Kafka's socket server
        stops first, instead of waiting on a broker that can no longer answer."""
        for sock in list(self._sockets):
            try:
                # The reading greenlet wakes with an EOF and closes the socket itself.
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # -- one connection -------------------------------------------------------

    def _serve_connection(self, sock: Any, address: tuple) -> None:
        peer, ip = f"{address[0]}:{address[1]}", address[0]
        limit = self.max_connections_per_ip
        if limit is not None and self._connections_per_ip[ip] >= limit:
            self.log.warning("closing connection from %s: %d connections from %s already "
                             "(max.connections.per.ip)", peer, limit, ip)
            sock.close()
            return
        self._connections_per_ip[ip] += 1
        self._sockets.add(sock)
        gevent.getcurrent().kafka_client_address = ip
        deadline: list[float | None] = [None]   # set while a frame's body is being read
        answers: _Answers | None = None
        try:
            # As Kafka's acceptor does: a response must not wait for the ACK
            # of the previous one (Nagle), or small answers stall by tens of ms.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(self.idle_timeout_s)
            reader = FrameReader(1, self.max_request_bytes)
            reserved = [0]

            def recv_into(view: memoryview, nbytes: int) -> int:
                if deadline[0] is not None:
                    remaining = deadline[0] - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError("request read timeout")
                    sock.settimeout(remaining if self.idle_timeout_s is None
                                    else min(remaining, self.idle_timeout_s))
                return sock.recv_into(view, nbytes)

            def reserve(size: int) -> None:
                # A frame that fits the connection's receive buffer costs no more
                # than that buffer, which every connection has anyway: it never
                # waits, so small requests (ApiVersions, metadata, heartbeats) are
                # served while large ones queue for the pool.
                if size > BUFFER_BYTES:
                    self.memory_pool.acquire(size)
                    reserved[0] = size
                if self.request_read_timeout_s is not None:
                    deadline[0] = time.monotonic() + self.request_read_timeout_s

            answers = _Answers(self, sock, peer)
            sliced_at = time.monotonic()
            while True:
                # Pipelined requests already in the socket buffer are read without
                # waiting, so the hub would never poll in between: pause once per
                # slice (1,000 pipelined Produce requests held a broker's loop for
                # 12 s, past its ZooKeeper session).
                if time.monotonic() - sliced_at >= cooperative.SLICE_MS / 1000:
                    cooperative.yield_to_io()
                    sliced_at = time.monotonic()
                try:
                    frame = self._read_frame(reader, recv_into, peer, reserve)
                    if frame is None:
                        answers.drain()       # the client may still read what it asked for
                        return
                    if deadline[0] is not None:
                        deadline[0] = None
                        sock.settimeout(self.idle_timeout_s)
                    self._dispatch(answers, peer, frame)
                finally:
                    if reserved[0]:
                        self.memory_pool.release(reserved[0])
                        reserved[0] = 0
        except _CloseConnection:
            pass
        except TimeoutError:
            if deadline[0] is not None:
                self.log.info("closing connection from %s: a request did not arrive whole "
                              "within %.0f ms", peer, self.request_read_timeout_s * 1000)
            else:
                self.log.debug("closing connection from %s: idle for %.0f ms", peer,
                               (self.idle_timeout_s or 0) * 1000)
        except OSError as exc:
            # Resets and broken pipes are routine client behaviour.
            self.log.debug("connection from %s failed: %s", peer, exc)
        finally:
            if answers is not None:
                answers.discard()
            self._sockets.discard(sock)
            sock.close()
            self._connections_per_ip[ip] -= 1
            if not self._connections_per_ip[ip]:
                del self._connections_per_ip[ip]

    def _read_frame(self, reader: FrameReader, recv_into, peer: str,
                    reserve) -> bytearray | None:
        """The next frame without its size prefix, or None on a clean EOF."""
        try:
            # The size is checked, then reserved in the pool, before anything
            # is allocated for the body.
            return reader.read(recv_into, reserve)
        except FrameSizeError as exc:
            self.log.warning("closing connection from %s: invalid request size %d "
                             "(allowed 1..%d)", peer, exc.size, self.max_request_bytes)
        except TruncatedFrame as exc:
            self.log.warning("closing connection from %s: %s", peer, exc)
        raise _CloseConnection()

    def _dispatch(self, answers: "_Answers", peer: str, frame: bytearray) -> None:
        try:
            header, body = decode_request(frame)
        except ProtocolError as exc:
            self.log.warning("closing connection from %s: unreadable request header: %s",
                             peer, exc)
            raise _CloseConnection() from None
        if not is_supported(header.api_key, header.api_version):
            answers.add(header, [self._unsupported(header, peer)])
            return
        try:
            result = self.handler(header, body)
            if result is None:
                return
            response_body, version = result
            if isinstance(response_body, DeferredResponse):
                answers.add(header, _Deferred(response_body, version))
                return
            parts = encode_response_parts(header.correlation_id, header.api_key,
                                          version, response_body)
        except ProtocolError as exc:
            self.log.warning("closing connection from %s: malformed %s v%d request "
                             "(correlation id %d): %s", peer, _key_name(header.api_key),
                             header.api_version, header.correlation_id, exc)
            raise _CloseConnection() from None
        except Exception:
            self._log_handler_failure(peer, header)
            raise _CloseConnection() from None
        answers.add(header, parts)

    def _log_handler_failure(self, peer: str, header: RequestHeader) -> None:
        self.log.exception("closing connection from %s: handler failed on %s v%d "
                           "(correlation id %d)", peer, _key_name(header.api_key),
                           header.api_version, header.correlation_id)

    def _send(self, sock: Any, peer: str, parts: list) -> None:
        """Write one response: buffers with send_all, file regions with sendfile."""
        if len(parts) == 1:
            send_all(sock, parts[0])
            return
        # Corked, the buffers and regions leave as full segments, not as one
        # small packet per partition header.
        _set_cork(sock, 1)
        try:
            for part in parts:
                if isinstance(part, FileRegions):
                    part.send_to(sock)
                elif part:
                    send_all(sock, part)
        except ShortFileRegion as exc:
            # The size prefix promised bytes a truncation has since removed.
            self.log.warning("closing connection from %s: log truncated while its "
                             "response was sent: %s", peer, exc)
            raise _CloseConnection() from None
        finally:
            for part in parts:
                if isinstance(part, FileRegions):
                    part.close()
        _set_cork(sock, 0)

    def _unsupported(self, header: RequestHeader, peer: str) -> bytes:
        """The KIP-511 fallback for ApiVersions; otherwise close, like Kafka."""
        if header.api_key != ApiKey.API_VERSIONS:
            self.log.warning("closing connection from %s: unsupported api_key %s "
                             "version %d (client_id %r)", peer, _key_name(header.api_key),
                             header.api_version, header.client_id)
            raise _CloseConnection()
        # Do not parse the body (it may be a flexible v3+ layout); answer with
        # header v0 + ApiVersions v0 so the client retries at a version we know.
        self.log.info("ApiVersions v%d from %s (client_id %r): replying "
                      "UNSUPPORTED_VERSION", header.api_version, peer, header.client_id)
        return encode_response(header.correlation_id, ApiKey.API_VERSIONS, 0, {
            "error_code": ErrorCode.UNSUPPORTED_VERSION,
            "api_keys": api_versions_entries(),
        })


class _Deferred:
    __slots__ = ("response", "version")

    def __init__(self, response: DeferredResponse, version: int) -> None:
        self.response, self.version = response, version


class _Answers:
    """One connection's answers, sent in request order.

    While nothing waits, an answer is sent at once by the reading greenlet, as
    before deferred answers existed.  Once one is deferred, it and every answer
    after it queue, and a writer greenlet finishes and sends them in order.
    """

    def __init__(self, server: ProtocolServer, sock: Any, peer: str) -> None:
        self.server, self.sock, self.peer = server, sock, peer
        self.queue: deque[tuple[RequestHeader, Any]] = deque()
        self.writer: gevent.Greenlet | None = None
        self.room = Event()
        self.room.set()
        self.broken = False

    def add(self, header: RequestHeader, answer: Any) -> None:
        """``answer``: the encoded parts, or a ``_Deferred``."""
        if self.broken:
            raise _CloseConnection()
        if not self.queue and not isinstance(answer, _Deferred):
            self.server._send(self.sock, self.peer, answer)
            return
        while len(self.queue) >= MAX_PENDING_RESPONSES:
            self.room.clear()
            self.room.wait()            # the connection is not read meanwhile
            if self.broken:
                _close_regions(answer)
                raise _CloseConnection()
        self.queue.append((header, answer))
        if self.writer is None:
            self.writer = gevent.spawn(self._write)

    def _write(self) -> None:
        try:
            while self.queue:
                header, answer = self.queue[0]
                if isinstance(answer, _Deferred):
                    try:
                        body = answer.response.finish()
                        answer = encode_response_parts(header.correlation_id, header.api_key,
                                                       answer.version, body)
                    except Exception:
                        self.server._log_handler_failure(self.peer, header)
                        raise _CloseConnection() from None
                    self.queue[0] = (header, answer)
                self.server._send(self.sock, self.peer, answer)
                self.queue.popleft()
                self.room.set()
        except (_CloseConnection, OSError) as exc:
            if isinstance(exc, OSError):
                self.server.log.debug("connection from %s failed: %s", self.peer, exc)
            self.broken = True
            self.room.set()
            # Wake the reading greenlet, which owns the socket and closes it.
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        finally:
            self.writer = None

    def drain(self) -> None:
        """Wait until every queued answer is sent (the client stopped sending)."""
        writer = self.writer
        if writer is not None:
            writer.join()

    def discard(self) -> None:
        """The connection is closing: stop the writer, free what unsent answers hold."""
        writer = self.writer
        if writer is not None and writer is not gevent.getcurrent():
            writer.kill()
        while self.queue:
            _close_regions(self.queue.popleft()[1])


def _close_regions(answer: Any) -> None:
    if isinstance(answer, list):
        for part in answer:
            if isinstance(part, FileRegions):
                part.close()


def _set_cork(sock: Any, on: int) -> None:
    if _TCP_CORK is not None:
        sock.setsockopt(socket.IPPROTO_TCP, _TCP_CORK, on)


_TCP_CORK = getattr(socket, "TCP_CORK", None)      # Linux; elsewhere parts go as they are


def _key_name(api_key: int) -> str:
    return api_key.name if isinstance(api_key, ApiKey) else str(api_key)
