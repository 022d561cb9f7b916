"""``ZkRequestGate``: a relay between one ZooKeeper client and the ensemble that stops the
client's requests at a chosen request, for faults that must land between two requests.

A :class:`~tests.harness.tcp_proxy.TcpProxy` cuts a whole path at the moment the test
calls ``cut()``; by then a client that pipelines its requests (the controller sends all
its multis of an election before it waits for the first reply) may have sent all of
them.  The gate instead reads the ZooKeeper wire protocol on the way up: every request
is a frame (a 4-byte length, then the xid, the opcode and the body; the first frame of a
connection is the ConnectRequest, which has no xid or opcode).  Once armed, it relays
frames until it meets the request it was told about, and holds that one (or the one
after it) and every later byte the client sends, on every connection, until
``release()``.  The decision is taken per frame in the relay itself, so it does not
depend on how fast the test reacts.  Replies still flow back.

Held bytes are only ever sent by ``release()``: a client killed while held never gets
them delivered, as a killed process's unsent requests never are.

>>> import socket
>>> upstream = socket.create_server(("127.0.0.1", 0))
>>> with ZkRequestGate([upstream.getsockname()]) as gate:
...     gate.arm(b"/topics/t/", passing=1)
...     client = socket.create_connection(gate.address, timeout=5)
...     server, _ = upstream.accept()
...     first, second = (_frame(_request(xid, MULTI, b"/topics/t/" + b"x" * xid)) for xid in (1, 2))
...     client.sendall(_frame(b"connect") + first + _frame(_request(3, MULTI, b"/other")) + second)
...     relayed = _receive_all(server, 0.5)
...     held = gate.held.is_set()
...     gate.release()
...     late = _receive_all(server, 0.5)
>>> relayed == _frame(b"connect") + first + _frame(_request(3, MULTI, b"/other")), held, late == second
(True, True, True)
>>> for sock in (client, server, upstream):
...     sock.close()
"""

import select
import struct
import threading

from tests.harness.tcp_proxy import TcpProxy

# Request opcodes (ZooKeeper's ZooDefs.OpCode) of the writes a test may want to stop at.
CREATE, DELETE, SET_DATA, MULTI, CREATE2 = 1, 2, 5, 14, 15
WRITES = (CREATE, DELETE, SET_DATA, MULTI, CREATE2)
_INT = struct.Struct(">i")


def gate_opcode(frame):
    """The opcode of a request frame (length prefix included) that is not a ConnectRequest."""
    return _INT.unpack_from(frame, 8)[0]


class _Connection:
    """Frame boundaries of one client connection's upstream byte stream."""

    def __init__(self):
        self.buffer = bytearray()
        self.frames = 0

    def next_frame(self):
        """The next complete frame (bytes, length prefix included), or None."""
        if len(self.buffer) < 4:
            return None
        end = 4 + _INT.unpack_from(self.buffer, 0)[0]
        if len(self.buffer) < end:
            return None
        frame = bytes(self.buffer[:end])
        del self.buffer[:end]
        self.frames += 1
        return frame


class ZkRequestGate(TcpProxy):
    """Relays ZooKeeper clients to the first of ``upstreams`` that accepts, and can hold
    their requests from a chosen one on (see the module docstring)."""

    def __init__(self, upstreams, port=0):
        self._connections = {}      # client socket -> _Connection
        self._upstream = {}         # client socket -> its upstream socket
        self._armed = None          # (marker, opcodes, passing) while armed
        self._passed = 0
        self.held = threading.Event()   # set once the gate holds requests
        self._held = {}             # client socket -> bytes held back
        super().__init__(upstreams, port)

    def arm(self, marker, opcodes=(MULTI,), passing=1):
        """Relay up to ``passing`` requests whose opcode is in ``opcodes`` and whose frame
        contains ``marker`` (bytes, e.g. part of a path), then hold from the next such
        request on (``passing=0``: from the first), with everything sent after it."""
        with self._flow:
            self._armed, self._passed = (marker, tuple(opcodes), passing), 0
            self.held.clear()

    def release(self):
        """Send what was held, in order, and relay everything again."""
        with self._flow:
            self._armed = None
            self.held.clear()
            for client, data in list(self._held.items()):
                upstream = self._upstream.get(client)
                try:
                    upstream.sendall(data)
                except (AttributeError, OSError):
                    pass    # that connection is gone, and its requests with it
            self._held.clear()

    def _upstream_part(self, client, upstream, data):
        self._upstream[client] = upstream
        connection = self._connections.setdefault(client, _Connection())
        if self.held.is_set():
            self._held[client] = self._held.get(client, b"") + data
            return b""
        connection.buffer += data
        out = bytearray()
        while (frame := connection.next_frame()) is not None:
            if connection.frames > 1 and self._stops_at(frame):
                self.held.set()
                self._held[client] = frame + bytes(connection.buffer)
                connection.buffer.clear()
                break
            out += frame
        return bytes(out)

    def _stops_at(self, frame):
        """Whether ``frame`` is the request to hold from (counting the ones let through)."""
        if self._armed is None:
            return False
        marker, opcodes, passing = self._armed
        if gate_opcode(frame) not in opcodes or marker not in frame:
            return False
        if self._passed < passing:
            self._passed += 1
            return False
        return True


# ---- helpers of the doctest --------------------------------------------------------

def _request(xid, opcode, body):
    return _INT.pack(xid) + _INT.pack(opcode) + body


def _frame(payload):
    return _INT.pack(len(payload)) + payload


def _receive_all(sock, quiet_s):
    """Everything ``sock`` receives until it has been quiet for ``quiet_s``."""
    data = b""
    while select.select([sock], [], [], quiet_s)[0]:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data
