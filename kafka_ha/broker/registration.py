"""Registering a broker as the ephemeral ``/brokers/ids/<id>``.

Runs at start-up and again on every new ZooKeeper session.  The cases that
bit Kafka (znodes.md §3):
- the node exists and our *current* session owns it: success (KAFKA-1387);
- it is owned by one of our *previous* sessions: delete it and retry (KAFKA-7165);
- it carries our own host and port but another session: most likely this
  broker's previous process, killed before its session expired; wait for the
  session to expire rather than fail (Kafka would refuse to start);
- anything else is a second broker with the same id: refuse.
"""
from __future__ import annotations

import logging
import time
from dataclasses import replace

from gevent.event import Event
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kafka_ha.clock import now_ms
from kafka_ha.model import BrokerInfo
from kafka_ha.zk import znodes as zn
from kafka_ha.zk.errors import MalformedZnode

log = logging.getLogger(__name__)


class DuplicateBrokerId(RuntimeError):
    pass


class BrokerRegistration:
    def __init__(self, zk: KazooClient, info: BrokerInfo, session_timeout_ms: int) -> None:
        self.zk = zk
        self.info = info
        self.session_timeout_s = session_timeout_ms / 1000
        self._our_sessions: set[int] = set()
        self.path = zn.BrokerIdZNode.path(info.broker_id)

    def ensure_common_paths(self) -> None:
        for path in zn.PERSISTENT_PATHS:
            self.zk.ensure_path(path)

    def register(self) -> None:
        session = self.zk.client_id[0]
        self._our_sessions.add(session)
        deadline = time.monotonic() + self.session_timeout_s * 2 + 5
        while True:
            data = zn.BrokerIdZNode.encode(replace(self.info, timestamp_ms=now_ms()))
            try:
                self.zk.create(self.path, data, ephemeral=True)
                log.info("Registered broker %d at path %s with addresses: PLAINTEXT://%s:%d",
                         self.info.broker_id, self.path, self.info.host, self.info.port)
                return
            except NodeExistsError:
                pass
            try:
                existing, stat = self.zk.get(self.path)
            except NoNodeError:
                continue
            owner = stat.ephemeralOwner
            if owner == session:
                log.info("Broker %d is already registered by this session", self.info.broker_id)
                return
            if owner in self._our_sessions:
                log.info("Deleting the registration left by our previous session 0x%x", owner)
                try:
                    self.zk.delete(self.path, version=stat.version)
                except (NoNodeError, BadVersionError):
                    pass
                continue
            if not self._looks_like_us(existing) or time.monotonic() > deadline:
                raise DuplicateBrokerId(
                    f"A broker is already registered on the path {self.path} (session 0x{owner:x}). "
                    f"This probably indicates that you either have configured a brokerid that is "
                    f"already in use, or else you have shutdown this broker and restarted it "
                    f"faster than the zookeeper timeout so it appears to be re-registering.")
            log.info("Waiting for the registration of our previous process (session 0x%x) to "
                     "expire", owner)
            gone = Event()
            if self.zk.exists(self.path, watch=lambda _e: gone.set()) is not None:
                gone.wait(timeout=1.0)

    def _looks_like_us(self, data: bytes) -> bool:
        try:
            other = zn.BrokerIdZNode.decode(data, self.path)
        except MalformedZnode:
            return False
        return (other.host, other.port) == (self.info.host, self.info.port)
