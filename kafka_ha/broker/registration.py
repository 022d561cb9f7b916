"""Registering a broker as the ephemeral ``/brokers/ids/<id>``.

Runs at start-up and again on every new ZooKeeper session.  The cases that
bit Kafka (docs/design.md §5):
- the node exists and our *current* session owns it: success (KAFKA-1387);
- it is owned by one of our *previous* sessions: delete it and retry (KAFKA-7165);
- it carries our own host and port, another session, and was written before
  this process started: it is this broker's previous process, killed before its
  session expired (this process listens on that address now, so no other live
  broker serves it).  Delete it and register at once: waiting out the session
  (Kafka would refuse to start instead) kept a restarted broker unregistered for a
  whole session timeout, answering every client with UNKNOWN_TOPIC_OR_PARTITION;
- our own host and port, but written since this process started: another process
  of this broker; wait for its session to expire rather than fail;
- anything else is a second broker with the same id: refuse.

The registration is watched while the session lives: if someone deletes it
(an operator; failure scenario #24, docs/design.md §9), the broker registers again
instead of serving on unregistered, which the controller would never learn
of (Kafka only re-registers on a new session).  kazoo forgets every watch when
its connection drops, even if the session survives (it sends no SetWatches on
reconnecting), so the watch is set again whenever the same session reconnects.
"""
from __future__ import annotations

import logging
import time
from dataclasses import replace

import gevent
from gevent.event import Event

from kafka_ha.clock import now_ms
from kafka_ha.model import BrokerInfo
from kafka_ha.zk import znodes as zn
from kafka_ha.zk.broker_store import BrokerStore, Registration
from kafka_ha.zk.errors import (ZkBadVersion, ZkConnectionLost, ZkError, ZkNoNode, ZkNodeExists,
                                error_text)
from kafka_ha.zk.mapped_client import WatchEvent

log = logging.getLogger(__name__)


class DuplicateBrokerId(RuntimeError):
    pass


class BrokerRegistration:
    def __init__(self, store: BrokerStore, info: BrokerInfo, session_timeout_ms: int) -> None:
        self.store = store
        self.info = info
        self.session_timeout_s = session_timeout_ms / 1000
        self._our_sessions: set[int] = set()
        # Our address is bound before this is made (server start-up order), so a
        # registration with our address from before this moment is a dead process's.
        self._started_ms = now_ms()
        self._watched_in: int | None = None   # the session whose registration we watch
        self.path = zn.BrokerIdZNode.path(info.broker_id)
        # The broker epoch (KIP-380): the czxid of our current registration, which the
        # controller names in its requests; None until registered.
        self.epoch: int | None = None
        self._epoch_known = Event()
        store.on_connected(self._on_connected)

    def wait_for_epoch(self, timeout_s: float) -> int | None:
        """Our broker epoch, waiting up to ``timeout_s`` while we register."""
        self._epoch_known.wait(timeout=timeout_s)
        return self.epoch

    def _learn_epoch(self, session: int) -> None:
        """Read back our registration's czxid (the create does not return it)."""
        existing = self.store.registration(self.info.broker_id)
        if existing is not None and existing.owner_session == session and existing.info is not None:
            if existing.info.epoch != self.epoch:
                log.info("Broker %d registered with broker epoch %d", self.info.broker_id,
                         existing.info.epoch)
            self.epoch = existing.info.epoch
            self._epoch_known.set()

    def ensure_common_paths(self) -> None:
        self.store.ensure_persistent_paths()

    def register(self) -> None:
        session = self.store.session_id
        if session is None:
            # Disconnected: the controller's retry waits for the connection and calls again.
            raise ZkConnectionLost("no ZooKeeper connection to register broker "
                                   f"{self.info.broker_id} in")
        self._our_sessions.add(session)
        deadline = time.monotonic() + self.session_timeout_s * 2 + 5
        while True:
            try:
                self.store.create_registration(replace(self.info, timestamp_ms=now_ms()))
                # The session names the registration's owner (its ephemeralOwner), so
                # operators and tests can tell which of the broker's sessions holds it.
                log.info("Registered broker %d at path %s with addresses: PLAINTEXT://%s:%d, "
                         "session 0x%x", self.info.broker_id, self.path, self.info.host,
                         self.info.port, session)
                self._learn_epoch(session)
                self._watch_registration()
                return
            except ZkNodeExists:
                pass
            existing = self.store.registration(self.info.broker_id)
            if existing is None:
                continue
            owner = existing.owner_session
            if owner == session:
                log.info("Broker %d is already registered by this session", self.info.broker_id)
                self._learn_epoch(session)
                self._watch_registration()
                return
            if owner in self._our_sessions:
                log.info("Deleting the registration left by our previous session 0x%x", owner)
                self._delete_stale(existing.version)
                continue
            if self._left_by_previous_process(existing):
                log.info("Deleting the registration left by the previous process of broker %d "
                         "(session 0x%x), killed before its session expired", self.info.broker_id,
                         owner)
                self._delete_stale(existing.version)
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
            if self.store.watch_registration(self.info.broker_id, lambda _e: gone.set()):
                gone.wait(timeout=1.0)

    def _delete_stale(self, version: int) -> None:
        try:
            self.store.delete_registration(self.info.broker_id, version)
        except (ZkNoNode, ZkBadVersion):
            pass   # gone or replaced meanwhile: the next round looks again

    # ---- the registration deleted under a live session ----------------------

    def _watch_registration(self) -> None:
        session = self.store.session_id
        if session is None:
            return  # disconnected: _on_connected watches again on reconnecting
        self._watched_in = session
        try:
            exists = self.store.watch_registration(self.info.broker_id,
                                                   self._on_registration_event)
        except ZkError:
            return  # the session is going: the next one registers (and watches) anew
        if not exists:
            gevent.spawn(self._register_again)  # deleted before the watch was set

    def _on_registration_event(self, event: WatchEvent) -> None:
        # On the ZooKeeper client's callback greenlet: must not block, so the work
        # gets a greenlet.
        if event is WatchEvent.DELETED:
            gevent.spawn(self._register_again)
        elif event is not WatchEvent.DISCONNECTED:
            gevent.spawn(self._watch_registration)  # changed: keep watching
        # DISCONNECTED: the connection dropped and the client forgot the watch.  If the
        # session survives, _on_connected watches again; a new session registers
        # anew (the controller's new-session handling), and watches then.

    def _on_connected(self) -> None:
        # A connection-state listener: must not block, so the work gets a greenlet.
        if self._watched_in is not None:
            gevent.spawn(self._watch_again_in_same_session)

    def _watch_again_in_same_session(self) -> None:
        if self.store.session_id == self._watched_in:
            self._watch_registration()  # registers again if it went meanwhile

    def _register_again(self) -> None:
        if not self.store.connected:
            return  # not this session's business: a new one registers anyway
        log.warning("The registration %s of broker %d was deleted while its session 0x%x is "
                    "alive; registering again", self.path, self.info.broker_id, self.store.session_id)
        try:
            self.register()
        except (ZkError, DuplicateBrokerId) as e:
            log.error("Broker %d could not register again: %s", self.info.broker_id, error_text(e))

    def _looks_like_us(self, existing: Registration) -> bool:
        other = existing.info  # None if malformed: not ours
        return other is not None and (other.host, other.port) == (self.info.host, self.info.port)

    def _left_by_previous_process(self, existing: Registration) -> bool:
        return self._looks_like_us(existing) and existing.info.timestamp_ms < self._started_ms
