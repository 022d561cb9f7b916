"""``TcpProxy``: a TCP relay a test can cut and heal, to take a process off a network path
(a broker off ZooKeeper) while the process keeps running.

SIGSTOP freezes the whole broker and iptables needs root; a relay between the broker and
ZooKeeper needs neither and cuts only that path.  ``cut()`` is a black hole, not a reset:

- nothing is relayed in either direction; bytes sent meanwhile wait in the kernel's
  buffers, as they would behind a dropped link;
- connections opened meanwhile are accepted and held without an upstream connection;
- so a ZooKeeper client hears nothing: kazoo drops its connection after its read timeout
  (2/3 of the session timeout) and its reconnection attempts hang, while the server
  expires the session after the session timeout.

``heal()`` resumes relaying on every connection both ends still hold and connects the held
ones upstream.  A ZooKeeper client then learns that its session expired and starts a new
one: exactly what a broker whose ZooKeeper network failed sees.  ``reset()`` is the short
blip instead: it drops the open connections and relays the client's reconnection, which
resumes the same session.

The relay runs on OS threads.  The pytest process is not monkey-patched (only a broker's
``main`` patches, when run as a program), so these threads run while a test blocks in
gevent's hub or in ``time.sleep``; were it patched, they would be greenlets and still run
whenever the test waits.

>>> upstream = socket.create_server(("127.0.0.1", 0))
>>> with TcpProxy([upstream.getsockname()]) as proxy:
...     client = socket.create_connection(proxy.address, timeout=5)
...     server, _ = upstream.accept()
...     relayed = _send_and_receive(client, server, b"ping")
...     proxy.cut()
...     client.sendall(b"lost?")
...     held = _no_data_within(server, 0.3)
...     proxy.heal()
...     late = _receive(server, 5)
...     proxy.reset()
...     dropped = _receive(client, 5), _receive(server, 5)
>>> relayed, held, late, dropped
(b'ping', True, b'lost?', (b'', b''))
>>> for sock in (client, server, upstream):
...     sock.close()
"""

import select
import socket
import threading

HOST = "127.0.0.1"
POLL_S = 0.1            # how often an idle relay thread looks at the cut/closed flags
SEND_TIMEOUT_S = 10.0   # a peer that stops reading must not wedge the relay forever


class TcpProxy:
    """Relays connections to ``HOST:port`` (``address``) to the first of ``upstreams``
    (``[(host, port)]``) that accepts."""

    def __init__(self, upstreams, port=0):
        self.upstreams = [tuple(u) for u in upstreams]
        self._listener = socket.create_server((HOST, port))
        self.address = self._listener.getsockname()[:2]
        # Held while a relay moves bytes, so that no byte passes once cut() returns.
        self._flow = threading.Condition()
        self._flowing = True
        self._closed = False
        self._links = set()        # open sockets, both ends of every connection
        self._threads = []
        self.accepted = 0          # connections accepted so far (a test can count reconnects)
        self._start(self._accept_loop)

    @property
    def connect_string(self):
        """``host:port`` of the relay, for a ZooKeeper connect string."""
        return f"{self.address[0]}:{self.address[1]}"

    def cut(self):
        """Relay nothing more, and hold new connections."""
        with self._flow:
            self._flowing = False

    def heal(self):
        """Relay again, and connect the connections held meanwhile upstream."""
        with self._flow:
            self._flowing = True
            self._flow.notify_all()

    def reset(self):
        """Drop every open connection (both ends see it close) and keep relaying new ones:
        a ZooKeeper client reconnects at once, in the same session."""
        for sock in list(self._links):
            try:
                # shutdown, not close: it wakes the relay thread's select on this socket.
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        """Stop accepting, close every connection both ways, and wait for the threads."""
        with self._flow:
            self._closed = True
            self._flow.notify_all()
        try:
            # Wakes the accepting thread (close alone leaves it blocked in accept on Linux).
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        for sock in list(self._links):
            _close(sock)
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- relaying -------------------------------------------------------------------

    def _start(self, target, *args):
        thread = threading.Thread(target=target, args=args, daemon=True,
                                  name=f"tcp-proxy-{self.address[1]}")
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _accept_loop(self):
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            self.accepted += 1
            client.settimeout(SEND_TIMEOUT_S)   # reads happen only when select says ready
            self._links.add(client)
            self._start(self._relay, client)

    def _wait_flowing(self):
        """Block while cut; False once closed."""
        with self._flow:
            while not (self._flowing or self._closed):
                self._flow.wait()
            return not self._closed

    def _relay(self, client):
        upstream = None
        try:
            if not self._wait_flowing():
                return
            upstream = self._connect_upstream()
            if upstream is None:
                return
            peer = {client: upstream, upstream: client}
            while not self._closed:
                readable, _, _ = select.select(list(peer), [], [], POLL_S)
                if readable and not self._pass_on(readable, peer, client):
                    return
        except OSError:
            return  # either end went away: so does the other
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    self._links.discard(sock)
                    _close(sock)

    def _pass_on(self, readable, peer, client):
        """Relay what ``readable`` sockets hold; False once one of them has closed."""
        with self._flow:
            if not self._flowing or self._holds(client):
                # The black hole: leave the bytes unread.  Waiting here, rather than
                # looping on select, keeps a cut relay idle.
                self._flow.wait(POLL_S)
                return True
            for sock in readable:
                data = sock.recv(65536)
                if not data:
                    return False
                if sock is client:
                    data = self._upstream_part(client, peer[sock], data)
                if data:
                    peer[sock].sendall(data)
        return True

    def _holds(self, client):
        """Whether to relay nothing, either way, on ``client``'s connection for now: never
        here; a subclass may black-hole chosen connections (called under the flow lock, so
        a change made under it applies before the next byte passes)."""
        return False

    def _upstream_part(self, client, upstream, data):
        """What to relay to ``upstream`` of ``data``, which ``client`` sent: all of it here;
        a subclass may hold some back (called under the flow lock, so one at a time)."""
        return data

    def _connect_upstream(self):
        for address in self.upstreams:
            try:
                sock = socket.create_connection(address, timeout=SEND_TIMEOUT_S)
            except OSError:
                continue
            self._links.add(sock)
            return sock
        return None


def _close(sock):
    try:
        sock.close()
    except OSError:
        pass


# ---- helpers of the doctests ----------------------------------------------------------

def _receive(sock, timeout_s):
    sock.settimeout(timeout_s)
    return sock.recv(1024)


def _send_and_receive(sender, receiver, data):
    sender.sendall(data)
    return _receive(receiver, 5)


def _no_data_within(sock, seconds):
    readable, _, _ = select.select([sock], [], [], seconds)
    return not readable
