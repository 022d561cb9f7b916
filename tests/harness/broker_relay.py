"""``BrokerRelay``: a relay in front of one broker's listener that can black-hole the
connections of chosen peer brokers while it relays everyone else's, and ``BrokerNetwork``,
which puts every broker of a cluster behind one of these and behind a ZooKeeper relay.

A partition between two brokers, with both still reachable by clients and ZooKeeper, needs
broker-to-broker traffic on a path of its own.  All brokers run on 127.0.0.1 and a broker
cannot be told which source address to connect from, so the relay tells peers apart by
what they say instead: every Kafka request header carries a client id, and a broker's own
connections name it: ``replica-fetcher-<id>`` (a follower fetching), ``controller-<id>``
(the controller's requests), ``broker-<id>`` (a controlled shutdown).  The relay peeks at
the first request of each connection (without consuming it) to learn which broker, if any,
opened it.

A blocked peer's connections are a black hole, as ``TcpProxy.cut()`` is: nothing passes
either way, nothing is reset, the bytes wait in the kernel's buffers, and new connections
are accepted and held.  A follower then sees its fetch hang until its socket timeout, and
the leader sees a follower that stopped fetching.  Blocking applies to connections already
open too: the flow lock is held while bytes move, so nothing passes once ``block()``
returns.  ``unblock()`` relays what waited, as a healed network delivers what TCP
retransmits.

The broker advertises the relay (``advertised.port``), so clients, the controller and
other brokers' fetchers all come through it; tests and tools that bootstrap on the
broker's own port get the relay's address from the metadata.

>>> import socket
>>> from kafka_ha.protocol.api import ApiKey
>>> from kafka_ha.protocol.framing import encode_request
>>> upstream = socket.create_server((HOST, 0))
>>> def request(client_id):
...     return encode_request(ApiKey.API_VERSIONS, 0, 1, client_id, {})
>>> with BrokerRelay(upstream.getsockname()[1]) as relay:
...     fetcher = socket.create_connection(relay.address, timeout=5)
...     fetcher.sendall(request("replica-fetcher-2"))
...     fetcher_upstream, _ = upstream.accept()
...     before = _receive(fetcher_upstream, 5) == request("replica-fetcher-2")
...     relay.block(2)
...     fetcher.sendall(b"held")
...     held_open = _no_data_within(fetcher_upstream, 0.3)
...     client = socket.create_connection(relay.address, timeout=5)
...     client.sendall(request("kafka-ha-producer"))
...     client_upstream, _ = upstream.accept()
...     relayed = _receive(client_upstream, 5) == request("kafka-ha-producer")
...     relay.unblock()
...     late = _receive(fetcher_upstream, 5)
>>> before, held_open, relayed, late, relay.held_from
(True, True, True, b'held', {2: 1})
>>> for sock in (fetcher, fetcher_upstream, client, client_upstream, upstream):
...     sock.close()
"""

import re
import select
import socket
import struct
import weakref

from kafka_ha.protocol.api import request_header_version
from tests.harness.tcp_proxy import HOST, TcpProxy, _no_data_within, _receive

# The client ids a broker's own connections carry (see the module docstring).
BROKER_CLIENT_ID = re.compile(r"(?:replica-fetcher|controller|broker)-(\d+)")
_HEADER = struct.Struct(">ihhih")   # size, api key, api version, correlation id, client id length
_UNKNOWN = object()                 # the first request has not fully arrived yet
PEEK_BYTES = 65536


def broker_of_request(data):
    """The broker id the client id of the request frame at the start of ``data`` names; None
    if it names none (or the header has no client id); ``_UNKNOWN`` if ``data`` is too short.

    >>> from kafka_ha.protocol.framing import encode_request
    >>> broker_of_request(encode_request(18, 0, 0, "replica-fetcher-3", {}))
    3
    >>> broker_of_request(encode_request(18, 0, 0, "kafka-ha-consumer", {})) is None
    True
    >>> broker_of_request(b"\\0\\0\\0\\x20\\0\\x01") is _UNKNOWN
    True
    """
    if len(data) < _HEADER.size:
        return _UNKNOWN
    _, api_key, api_version, _, length = _HEADER.unpack_from(data)
    if request_header_version(api_key, api_version) < 1 or length < 0:
        return None
    if len(data) < _HEADER.size + length:
        return _UNKNOWN
    client_id = data[_HEADER.size:_HEADER.size + length].decode("utf-8", "replace")
    named = BROKER_CLIENT_ID.fullmatch(client_id)
    return int(named.group(1)) if named else None


class BrokerRelay(TcpProxy):
    """Relays connections to a broker's listener on ``HOST:broker_port``; ``block(peer)``
    black-holes those a broker ``peer`` opens (see the module docstring)."""

    def __init__(self, broker_port, port=0):
        self._peer = weakref.WeakKeyDictionary()   # client socket -> broker id or None
        self._blocked = set()
        self._held = weakref.WeakSet()              # connections held at least once
        self.held_from = {}                          # {peer broker: connections held}
        super().__init__([(HOST, broker_port)], port)

    def block(self, *brokers):
        """Relay nothing more on connections that ``brokers`` opened or will open."""
        with self._flow:
            self._blocked |= set(brokers)

    def unblock(self, *brokers):
        """Relay the connections of ``brokers`` (default: every blocked one) again."""
        with self._flow:
            self._blocked -= set(brokers) if brokers else set(self._blocked)
            self._flow.notify_all()

    @property
    def blocked(self):
        return frozenset(self._blocked)

    def _holds(self, client):
        peer = self._peer.get(client, _UNKNOWN)
        if peer is _UNKNOWN:
            peer = self._identify(client)
            if peer is _UNKNOWN:
                return True      # wait for the whole first header before any byte passes
            self._peer[client] = peer
        if peer is None or peer not in self._blocked:
            return False
        if client not in self._held:
            self._held.add(client)
            self.held_from[peer] = self.held_from.get(peer, 0) + 1
        return True

    @staticmethod
    def _identify(client):
        """Who opened ``client``'s connection, from its first request, left unread."""
        if not select.select([client], [], [], 0)[0]:
            return _UNKNOWN      # only the broker's side spoke: not a Kafka client
        try:
            data = client.recv(PEEK_BYTES, socket.MSG_PEEK)
        except OSError:
            return None          # let the relay find out what went wrong
        if not data:
            return None          # closed before a request: relay the end of it
        return broker_of_request(data)


class BrokerNetwork:
    """Every broker of ``cluster`` (a ClusterFixture not started yet) behind a BrokerRelay it
    advertises and a TcpProxy to ZooKeeper, so that a test can cut two brokers off each
    other (``cut_brokers``) or one broker off ZooKeeper (``cut_zookeeper``) while both
    still serve clients.  Set up before ``cluster.start()``."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.listeners, self.zookeeper = {}, {}
        servers = cluster.zk_servers
        try:
            for i in cluster.broker_ids:
                self.listeners[i] = BrokerRelay(cluster.port(i))
                cluster.set_broker_config(i, {"advertised.port": self.listeners[i].address[1]})
                # Each ZooKeeper relay prefers another server, so the sessions spread as they would.
                k = i % len(servers)
                self.zookeeper[i] = TcpProxy(servers[k:] + servers[:k])
                cluster.connect_broker_through(i, self.zookeeper[i].connect_string)
        except BaseException:
            self.close()
            raise

    def cut_brokers(self, a, b):
        """Black-hole every connection between brokers ``a`` and ``b``, both ways."""
        self.listeners[a].block(b)
        self.listeners[b].block(a)

    def heal_brokers(self):
        for relay in self.listeners.values():
            relay.unblock()

    def cut_zookeeper(self, broker):
        self.zookeeper[broker].cut()

    def heal_zookeeper(self, broker):
        self.zookeeper[broker].heal()

    def heal(self):
        self.heal_brokers()
        for proxy in self.zookeeper.values():
            proxy.heal()

    def held_between(self, a, b):
        """Connections the cut between ``a`` and ``b`` has held so far, both ways."""
        return self.listeners[a].held_from.get(b, 0) + self.listeners[b].held_from.get(a, 0)

    def close(self):
        for relay in [*self.listeners.values(), *self.zookeeper.values()]:
            relay.close()
