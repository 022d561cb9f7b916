"""A leader's ISR changes in ZooKeeper, and the notifications that tell the controller.

The leader rewrites its partition's state znode conditionally on the
``zk_version`` it got in LeaderAndIsr (or from its own last write).  On a
version conflict it re-reads: identical content means its earlier write went
through (KAFKA-1382); anything else means the controller changed the
partition, so the leader keeps its ISR and waits for the controller's
LeaderAndIsr, logging Kafka's "Cached zkVersion" line.

Changed partitions are batched into ``/isr_change_notification/isr_change_<seq>``
znodes so the controller refreshes every broker's metadata (Kafka 0.9+).
"""
from __future__ import annotations

import logging
import time

import gevent
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NoNodeError

from kafka_ha.model import TopicPartition
from kafka_ha.zk import admin_znodes as azn, znodes as zn
from kafka_ha.zk.errors import MalformedZnode, error_text

log = logging.getLogger(__name__)

# Kafka checks every 2.5 s and writes once changes have been quiet for 5 s (or
# 60 s have passed); metadata that stale slows clients' failover, so we check
# every 250 ms and write after 500 ms of quiet (or 5 s).
NOTIFY_CHECK_S = 0.25
NOTIFY_QUIET_S = 0.5
NOTIFY_MAX_DELAY_S = 5.0
NOTIFY_MAX_PARTITIONS = 5000


class IsrWriter:
    def __init__(self, zk: KazooClient, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self._pending: set[TopicPartition] = set()
        self._first_change = 0.0
        self._last_change = 0.0
        self._notifier = gevent.spawn(self._notify_loop)

    def stop(self) -> None:
        self._notifier.kill(block=False)

    def spawn_change(self, partition, new_isr: tuple[int, ...], reason: str,
                     on_done=None) -> None:
        """Change the ISR on a greenlet of its own (from a fetch path that must not block);
        ``on_done()`` runs when the write has succeeded or failed."""
        gevent.spawn(self._change_then_clear, partition, new_isr, reason, on_done)

    def _change_then_clear(self, partition, new_isr: tuple[int, ...], reason: str, on_done) -> None:
        try:
            self.change(partition, new_isr, reason)
        finally:
            if on_done is not None:
                on_done()

    def change(self, partition, new_isr: tuple[int, ...], reason: str) -> bool:
        """Expand the ISR to ``new_isr``: its members not in the ISR join it."""
        joining = [r for r in new_isr if r not in partition.isr]
        return self._write(partition, lambda isr: isr + tuple(r for r in joining if r not in isr),
                           reason)

    def remove(self, partition, leaving: list[int], reason: str) -> bool:
        """Shrink the ISR by ``leaving``."""
        return self._write(partition, lambda isr: tuple(r for r in isr if r not in leaving), reason)

    def _write(self, partition, new_isr_from, reason: str) -> bool:
        # Every change is computed from the ISR as it is once this writer holds
        # the partition's lock: changes queued behind each other compose.
        with partition.isr_lock():
            old_isr = partition.isr
            new_isr = new_isr_from(old_isr)
            if not partition.is_leader or set(new_isr) == set(old_isr) or not new_isr:
                return False
            desired = partition.state_for_zk(new_isr)
            path = zn.TopicPartitionStateZNode.path(*partition.tp)
            try:
                stat = self.zk.set(path, zn.TopicPartitionStateZNode.encode(desired),
                                   version=partition.zk_version)
                version = stat.version
            except BadVersionError:
                version = self._version_if_ours(path, desired, partition.zk_version)
                if version is None:
                    return False
            except (KazooException, OSError) as e:
                log.warning("Partition %s on broker %d: could not write ISR %s (%s); will retry",
                            partition.tp, self.broker_id, list(new_isr), error_text(e))
                return False
            verb = "Expanding" if len(new_isr) > len(old_isr) else "Shrinking"
            log.info("Partition %s on broker %d: %s ISR from %s to %s: %s", partition.tp,
                     self.broker_id, verb, ",".join(map(str, old_isr)), ",".join(map(str, new_isr)),
                     reason)
            partition.set_isr(tuple(new_isr), version)
            self._record(partition.tp)
            return True

    def _version_if_ours(self, path: str, desired, cached_version: int) -> int | None:
        try:
            data, stat = self.zk.get(path)
            stored = zn.TopicPartitionStateZNode.decode(data, path, stat.version)
        except (NoNodeError, MalformedZnode, KazooException) as e:
            log.warning("Could not re-read %s after a version conflict: %s", path, error_text(e))
            return None
        if stored.same_content(desired):
            return stat.version
        log.info("Cached zkVersion [%d] not equal to that in zookeeper, skip updating ISR "
                 "(%s is now %s)", cached_version, path, data.decode(errors="replace"))
        return None

    # ---- notifications ---------------------------------------------------

    def _record(self, tp: TopicPartition) -> None:
        now = time.monotonic()
        if not self._pending:
            self._first_change = now
        self._pending.add(tp)
        self._last_change = now

    def _notify_loop(self) -> None:
        while True:
            gevent.sleep(NOTIFY_CHECK_S)
            now = time.monotonic()
            if self._pending and (now - self._last_change >= NOTIFY_QUIET_S
                                  or now - self._first_change >= NOTIFY_MAX_DELAY_S):
                self._write_notifications()

    def _write_notifications(self) -> None:
        changed = sorted(self._pending)
        try:
            for i in range(0, len(changed), NOTIFY_MAX_PARTITIONS):
                self.zk.create(azn.IsrChangeNotificationZNode.PREFIX,
                               azn.IsrChangeNotificationZNode.encode(changed[i:i + NOTIFY_MAX_PARTITIONS]),
                               sequence=True, makepath=True)
        except (KazooException, OSError) as e:
            log.warning("Could not write an ISR change notification (%s); will retry", error_text(e))
            return
        self._pending.difference_update(changed)
