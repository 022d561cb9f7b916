"""A blocking request/response client connection to one broker, for greenlets.

It uses ``gevent.socket`` so that a greenlet waiting on a broker yields to the
hub whether or not the process is monkey-patched.

Requests from several greenlets are pipelined, as Kafka's clients do (the
producer's max.in.flight.requests.per.connection): each is sent as soon as the
previous one has been written, and since Kafka answers a connection's requests
in order, the callers then read their responses in the order they sent them,
each waiting for its turn.  A single caller sees plain request/response.

After any I/O or framing failure the socket is dropped (the byte stream can no
longer be trusted): every request waiting on it fails, and the next request
reconnects.  After ``close()`` the connection stays closed.
"""
from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable, TypeVar

from gevent import socket
from gevent.event import Event
from gevent.lock import RLock

from kafka_ha.protocol.framing import decode_response, encode_request
from kafka_ha.protocol.primitives import ProtocolError
from kafka_ha.protocol.stream_io import FrameReader, FrameSizeError, TruncatedFrame, send_all

_T = TypeVar("_T")
DEFAULT_MAX_RESPONSE_BYTES = 100 * 1024 * 1024
_CORRELATION_MASK = 0x7FFFFFFF


class BrokerConnectionError(ConnectionError):
    """Base class of every failure of a ``BrokerConnection``."""


class BrokerUnreachable(BrokerConnectionError):
    """The TCP connection could not be established."""


class ConnectionLost(BrokerConnectionError):
    """The peer closed or reset the connection, or a send/recv failed."""


class RequestTimedOut(BrokerConnectionError):
    """No complete response arrived within the request timeout."""


class CorrelationIdMismatch(BrokerConnectionError):
    """The response does not belong to the request just sent."""


class ConnectionClosed(BrokerConnectionError):
    """``close()`` was called; the connection cannot be used any more."""


class SocketReplaced(BrokerConnectionError):
    """The request was meant for a socket that has dropped since; it was not sent."""


class _Pending:
    """A request sent on the current socket whose response is not read yet."""

    __slots__ = ("generation", "turn")

    def __init__(self, generation: int) -> None:
        self.generation = generation      # the socket it was sent on
        self.turn = Event()               # set when every earlier response has been read


class BrokerConnection:
    """One TCP connection to ``host:port`` speaking the Kafka protocol."""

    def __init__(self, host: str, port: int, client_id: str | None = "kafka-ha",
                 timeout_s: float = 30.0,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.max_response_bytes = max_response_bytes
        self._sock: socket.socket | None = None
        self._closed = False
        self._next_correlation_id = 0
        self._reader = FrameReader(0, max_response_bytes)
        self._lock = RLock()                   # held while a request is written
        self._pending: deque[_Pending] = deque()   # sent, not yet answered, in send order
        self._generation = 0                   # counts sockets: a drop fails their pending requests

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port})"

    def __enter__(self) -> "BrokerConnection":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return self._sock is not None

    @property
    def generation(self) -> int:
        """Counts dropped sockets: pass it to :meth:`request` as ``on_socket``."""
        return self._generation

    def connect(self) -> None:
        """Open the socket now (requests also connect lazily)."""
        with self._lock:
            self._ensure_socket()

    def close(self) -> None:
        self._closed = True
        self._drop_socket()

    def request(self, api_key: int, api_version: int, body: dict[str, Any],
                timeout_s: float | None = None, on_socket: int | None = None) -> dict[str, Any]:
        """Send one request and return its decoded response body.

        ``timeout_s`` overrides the connection default for this call (long
        polls such as Fetch need more than ``max_wait_ms``).  ``on_socket``, a
        :attr:`generation` read earlier, sends the request only if that socket
        is still the one in use (else ``SocketReplaced``): a producer that
        pipelines batches must not send a later batch on a new socket while
        the earlier ones, lost with the old socket, wait for their retry.
        """
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        sent = self._begin(api_key, api_version, body, deadline, on_socket)
        return self._finish(api_key, api_version, sent, deadline)

    def request_pipelined(self, requests: list[tuple[int, int, dict[str, Any]]],
                          timeout_s: float | None = None) -> list[dict[str, Any]]:
        """Send ``requests`` (api key, version, body) back to back, then read their answers:
        one round trip for all of them instead of one each.  A broker serves a connection's
        requests one after the other, so their effects keep this order.  If any exchange
        fails, the socket is dropped and the error raised: no answer is returned, and the
        caller cannot tell which requests took effect."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        sent = [self._begin(api_key, api_version, body, deadline, None)
                for api_key, api_version, body in requests]
        return [self._finish(api_key, api_version, one, deadline)
                for (api_key, api_version, _), one in zip(requests, sent)]

    def _begin(self, api_key: int, api_version: int, body: dict[str, Any], deadline: float,
               on_socket: int | None) -> tuple[int, "_Pending"]:
        """Write the request and take its place in line for the answer."""
        with self._lock:
            if on_socket is not None and on_socket != self._generation:
                raise SocketReplaced(f"{self}: the connection dropped before the request was sent")
            correlation_id = self._send(api_key, api_version, body, deadline)
            pending = _Pending(self._generation)
            self._pending.append(pending)
            if len(self._pending) == 1:
                pending.turn.set()
        return correlation_id, pending

    def _finish(self, api_key: int, api_version: int, sent: tuple[int, "_Pending"],
                deadline: float) -> dict[str, Any]:
        """Wait for the request's turn, read its answer and decode it."""
        correlation_id, pending = sent
        frame = None
        try:
            self._await_turn(pending, deadline)
            frame = self._guarded(self._read_frame, deadline)
        finally:
            if frame is None and pending.generation == self._generation:
                # Failed, timed out or killed before reading our response: the
                # next caller in line would read it as theirs.
                self._drop_socket()
            self._leave(pending)
        try:
            got_id, response = decode_response(api_key, api_version, frame)
        except ProtocolError:
            self._drop_socket()
            raise
        if got_id != correlation_id:
            self._drop_socket()
            raise CorrelationIdMismatch(
                f"{self}: expected correlation id {correlation_id}, got {got_id}")
        return response

    def send_only(self, api_key: int, api_version: int, body: dict[str, Any],
                  timeout_s: float | None = None) -> int:
        """Send a request that gets no response (Produce acks=0); return its id."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        with self._lock:
            return self._send(api_key, api_version, body, deadline)

    # -- internals ------------------------------------------------------------

    def _await_turn(self, pending: _Pending, deadline: float) -> None:
        """Wait until every response sent before ours has been read."""
        if not pending.turn.wait(max(0.0, deadline - time.monotonic())):
            raise RequestTimedOut(f"{self}: no response within the timeout "
                                  f"({len(self._pending) - 1} earlier request(s) unanswered)")
        if pending.generation != self._generation:
            raise ConnectionLost(f"{self}: connection dropped before the response arrived")

    def _leave(self, pending: _Pending) -> None:
        """Our response is read (or the socket dropped): hand the turn to the next in line."""
        if self._pending and self._pending[0] is pending:
            self._pending.popleft()
            if self._pending:
                self._pending[0].turn.set()

    def _send(self, api_key: int, api_version: int, body: dict[str, Any],
              deadline: float) -> int:
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & _CORRELATION_MASK
        # Encode before touching the socket: a bad body is the caller's bug
        # and must not cost the connection.
        frame = encode_request(api_key, api_version, correlation_id, self.client_id, body)
        self._guarded(self._sendall, frame, deadline)
        return correlation_id

    def _guarded(self, operation: Callable[..., _T], *args: Any) -> _T:
        """Run a socket operation, mapping failures to our exception types.

        Any failure drops the socket: after a partial send or receive the
        byte stream is out of step with the correlation ids.
        """
        self._ensure_socket()
        try:
            return operation(*args)
        except BrokerConnectionError:
            self._drop_socket()
            raise
        except socket.timeout:
            self._drop_socket()
            raise RequestTimedOut(f"{self}: no response within the timeout") from None
        except OSError as exc:
            self._drop_socket()
            raise ConnectionLost(f"{self}: {exc}") from exc
        except BaseException:
            # ProtocolError, or a gevent Timeout/kill arriving mid-exchange.
            self._drop_socket()
            raise

    def _ensure_socket(self) -> socket.socket:
        if self._closed:
            raise ConnectionClosed(f"{self} is closed")
        if self._sock is None:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
            except OSError as exc:
                raise BrokerUnreachable(f"{self}: cannot connect: {exc}") from exc
            # Requests are small and latency-bound; do not wait for Nagle.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = sock
        return self._sock

    def _drop_socket(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            self._generation += 1
            self._reader.reset()           # buffered bytes came from the old socket
            # Requests waiting on this socket will never get their answer.
            waiting, self._pending = self._pending, deque()
            for pending in waiting:
                pending.turn.set()
            try:
                sock.close()
            except OSError:
                pass

    def _set_timeout(self, deadline: float) -> socket.socket:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("deadline passed")
        sock = self._sock
        if sock is None:
            raise ConnectionLost(f"{self}: socket was closed")
        sock.settimeout(remaining)
        return sock

    def _sendall(self, frame: bytes, deadline: float) -> None:
        send_all(self._set_timeout(deadline), frame, deadline)

    def _read_frame(self, deadline: float) -> bytearray:
        def recv_into(view: memoryview, nbytes: int) -> int:
            return self._set_timeout(deadline).recv_into(view, nbytes)
        try:
            # A corrupt size is rejected before anything is allocated for it.
            frame = self._reader.read(recv_into)
        except TruncatedFrame as exc:
            raise ConnectionLost(f"{self}: connection closed by peer ({exc})") from None
        except FrameSizeError as exc:
            raise ProtocolError(f"{self}: response size {exc.size} outside "
                                f"0..{self.max_response_bytes}") from None
        if frame is None:
            raise ConnectionLost(f"{self}: connection closed by peer (0 of 4 bytes read)")
        return frame
