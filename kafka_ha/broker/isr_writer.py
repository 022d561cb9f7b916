"""A leader's ISR changes in ZooKeeper, and the notifications that tell the controller.

The leader rewrites its partition's state znode conditionally on the
``zk_version`` it got in LeaderAndIsr (or from its own last write).  On a
version conflict it re-reads: identical content means its earlier write went
through (KAFKA-1382); anything else means the controller changed the
partition, so the leader keeps its ISR and waits for the controller's
LeaderAndIsr, logging Kafka's "Cached zkVersion" line.

A write that ends without an answer (the connection dropped with it in flight,
the session expired) may or may not have been applied, so the cached version is
in doubt: the partition is re-read as soon as the connection is back, and its
next write waits for that re-read.  Every change is decided in one leader epoch
and is dropped if the partition has moved to another one before it is written
or answered: that epoch's ISR and follower positions no longer apply.

Changed partitions are batched into ``/isr_change_notification/isr_change_<seq>``
znodes so the controller refreshes every broker's metadata (Kafka 0.9+).
"""
from __future__ import annotations

import logging
import time
from typing import NamedTuple

import gevent

from kafka_ha.model import LeaderAndIsr, TopicPartition
from kafka_ha.zk import znodes as zn
from kafka_ha.zk.broker_store import BrokerStore
from kafka_ha.zk.errors import MalformedZnode, ZkBadVersion, ZkError, ZkNoNode, error_text

log = logging.getLogger(__name__)

# Kafka checks every 2.5 s and writes once changes have been quiet for 5 s (or
# 60 s have passed); metadata that stale slows clients' failover, so we check
# every 250 ms and write after 500 ms of quiet (or 5 s).
NOTIFY_CHECK_S = 0.25
NOTIFY_QUIET_S = 0.5
NOTIFY_MAX_DELAY_S = 5.0
NOTIFY_MAX_PARTITIONS = 5000
# How often partitions whose last write is in doubt are re-read while the connection is down.
IN_DOUBT_RETRY_S = 0.2


class InDoubt(NamedTuple):
    """An ISR write that got no answer: what it wrote (with the version it was conditional on)."""
    desired: LeaderAndIsr
    old_isr: tuple[int, ...]
    reason: str


def _describe(state: LeaderAndIsr) -> str:
    return (f"leader {state.leader}, leader_epoch {state.leader_epoch}, isr {list(state.isr)}, "
            f"zkVersion {state.zk_version}")


class IsrWriter:
    def __init__(self, store: BrokerStore, broker_id: int) -> None:
        self.store = store
        self.broker_id = broker_id
        self._pending: set[TopicPartition] = set()
        self._first_change = 0.0
        self._last_change = 0.0
        self._in_doubt: dict[object, InDoubt] = {}   # Partition -> its unanswered write
        self._when_resolved: dict[object, list] = {}  # Partition -> on_done callbacks held back
        self._resolver: gevent.Greenlet | None = None
        self._notifier = gevent.spawn(self._notify_loop)

    def stop(self) -> None:
        self._notifier.kill(block=False)
        if self._resolver is not None:
            self._resolver.kill(block=False)

    def spawn_change(self, partition, new_isr: tuple[int, ...], reason: str,
                     on_done=None) -> None:
        """Change the ISR on a greenlet of its own (from a fetch path that must not block);
        ``on_done()`` runs when the write has succeeded or failed."""
        gevent.spawn(self._change_then_clear, partition, new_isr, reason, on_done, partition.leader_epoch)

    def _change_then_clear(self, partition, new_isr: tuple[int, ...], reason: str, on_done,
                           leader_epoch: int) -> None:
        try:
            self.change(partition, new_isr, reason, leader_epoch)
        finally:
            if on_done is not None:
                if partition in self._in_doubt:
                    # ZooKeeper may list the follower in the ISR already (an election could
                    # pick it): it keeps counting for the HW until the re-read tells.
                    self._when_resolved.setdefault(partition, []).append(on_done)
                else:
                    on_done()

    def change(self, partition, new_isr: tuple[int, ...], reason: str,
               leader_epoch: int | None = None) -> bool:
        """Expand the ISR to ``new_isr``: its members not in the ISR join it.

        ``leader_epoch``: the epoch the decision was made in (default: the current one).
        """
        joining = [r for r in new_isr if r not in partition.isr]
        return self._write(partition, lambda isr: isr + tuple(r for r in joining if r not in isr),
                           reason, leader_epoch)

    def remove(self, partition, leaving: list[int], reason: str, leader_epoch: int | None = None) -> bool:
        """Shrink the ISR by ``leaving``."""
        return self._write(partition, lambda isr: tuple(r for r in isr if r not in leaving), reason,
                           leader_epoch)

    def _write(self, partition, new_isr_from, reason: str, leader_epoch: int | None) -> bool:
        # The epoch is taken before waiting for the lock: a LeaderAndIsr may come meanwhile.
        epoch = partition.leader_epoch if leader_epoch is None else leader_epoch
        # Every change is computed from the ISR as it is once this writer holds
        # the partition's lock: changes queued behind each other compose.
        with partition.isr_lock():
            if not partition.is_leader or partition.leader_epoch != epoch:
                return False
            if partition in self._in_doubt and not self._resolve(partition):
                return False   # still no connection: a conditional write could only conflict
            if not partition.is_leader or partition.leader_epoch != epoch:
                # The re-read waited on ZooKeeper, and a LeaderAndIsr may have come meanwhile
                # (it does not take the ISR lock): this broker would write itself in as leader.
                return False
            old_isr = partition.isr
            new_isr = tuple(new_isr_from(old_isr))
            if set(new_isr) == set(old_isr) or not new_isr:
                return False
            desired = partition.state_for_zk(new_isr)
            path = zn.TopicPartitionStateZNode.path(*partition.tp)
            try:
                version = self.store.write_partition_state(partition.tp, desired, partition.zk_version)
            except ZkBadVersion:
                version = self._version_if_ours(partition, InDoubt(desired, old_isr, reason))
                if version is None:
                    return False
            except ZkNoNode:
                log.warning("Partition %s on broker %d: could not write ISR %s: %s does not exist",
                            partition.tp, self.broker_id, list(new_isr), path)
                return False
            except (ZkError, OSError) as e:
                log.warning("Partition %s on broker %d: writing ISR %s got no answer (%s); it may "
                            "have been applied, so %s will be read again before the next write",
                            partition.tp, self.broker_id, list(new_isr), error_text(e), path)
                self._mark_in_doubt(partition, InDoubt(desired, old_isr, reason))
                return False
            return self._adopt(partition, InDoubt(desired, old_isr, reason), version)

    def _adopt(self, partition, write: InDoubt, version: int) -> bool:
        """Take over an ISR written at ``version``, unless the partition has a newer leadership."""
        new_isr = write.desired.isr
        if not partition.set_isr(new_isr, version, write.desired.leader_epoch):
            log.info("Partition %s on broker %d: ISR %s written at leader epoch %d is not adopted: "
                     "the partition is at leader epoch %d (zkVersion %d) now", partition.tp,
                     self.broker_id, list(new_isr), write.desired.leader_epoch, partition.leader_epoch,
                     partition.zk_version)
            return False
        verb = "Expanding" if len(new_isr) > len(write.old_isr) else "Shrinking"
        log.info("Partition %s on broker %d: %s ISR from %s to %s: %s", partition.tp,
                 self.broker_id, verb, ",".join(map(str, write.old_isr)), ",".join(map(str, new_isr)),
                 write.reason)
        self._record(partition.tp)
        return True

    def _version_if_ours(self, partition, write: InDoubt) -> int | None:
        """After a version conflict: the znode's version if it holds what we wrote, else None.

        A re-read that gets no answer leaves the partition in doubt (re-read later).
        """
        path = zn.TopicPartitionStateZNode.path(*partition.tp)
        try:
            stored = self.store.partition_state(partition.tp)
        except (ZkNoNode, MalformedZnode) as e:
            log.warning("Could not re-read %s after a version conflict: %s", path, error_text(e))
            return None
        except (ZkError, OSError) as e:
            log.warning("Could not re-read %s after a version conflict (%s); will read it again",
                        path, error_text(e))
            self._mark_in_doubt(partition, write)
            return None
        if stored.same_content(write.desired):
            return stored.zk_version
        log.info("Cached zkVersion [%d] not equal to that in zookeeper, skip updating ISR "
                 "(%s is now %s)", partition.zk_version, path, _describe(stored))
        self._fence_if_deposed(partition, stored)
        return None

    def _fence_if_deposed(self, partition, stored) -> None:
        """A state written for a newer leader epoch means the controller has moved on: this
        leader stops acknowledging now instead of when its LeaderAndIsr arrives."""
        if stored.leader_epoch > partition.leader_epoch or (
                stored.leader_epoch == partition.leader_epoch and stored.leader != self.broker_id):
            partition.fence(stored.leader_epoch)

    # ---- writes without an answer ----------------------------------------

    def _mark_in_doubt(self, partition, write: InDoubt) -> None:
        self._in_doubt[partition] = write
        if self._resolver is None or self._resolver.dead:
            self._resolver = gevent.spawn(self._resolve_in_doubt)

    def _resolve_in_doubt(self) -> None:
        """Re-read every partition in doubt once the connection is back."""
        while self._in_doubt:
            gevent.sleep(IN_DOUBT_RETRY_S)
            if not self.store.connected:
                continue
            for partition in list(self._in_doubt):
                with partition.isr_lock():
                    if partition in self._in_doubt:
                        self._resolve(partition)

    def _resolve(self, partition) -> bool:
        """Re-read a partition in doubt (under its ISR lock): adopt our write's version if it
        went through.  False if the znode could not be read (the doubt remains)."""
        write = self._in_doubt[partition]
        if not partition.is_leader or partition.leader_epoch != write.desired.leader_epoch \
                or partition.zk_version != write.desired.zk_version:
            # A LeaderAndIsr has brought a fresh state and version, or a version
            # conflict's re-read has settled it.
            self._end_doubt(partition)
            return True
        path = zn.TopicPartitionStateZNode.path(*partition.tp)
        try:
            stored = self.store.partition_state(partition.tp)
        except (ZkNoNode, MalformedZnode) as e:
            log.warning("Could not re-read %s after an unanswered ISR write: %s", path, error_text(e))
            self._end_doubt(partition)
            return True
        except (ZkError, OSError):
            return False
        if stored.zk_version == write.desired.zk_version:
            pass   # not applied: the cached version is right
        elif stored.same_content(write.desired):
            self._adopt(partition, write, stored.zk_version)
        else:
            log.info("Cached zkVersion [%d] not equal to that in zookeeper, skip updating ISR "
                     "(%s is now %s)", partition.zk_version, path, _describe(stored))
            self._fence_if_deposed(partition, stored)
            # Our write may have been applied before the other one: an expansion's followers
            # may have been in ZooKeeper's ISR, and an election may have counted on them.
            # They keep counting for the HW until a LeaderAndIsr starts a new epoch.
            self._end_doubt(partition, release_joiners=False)
            return True
        self._end_doubt(partition)
        return True

    def _end_doubt(self, partition, release_joiners: bool = True) -> None:
        """``release_joiners``: whether the held-back ``on_done`` callbacks may run (they let
        an expansion's followers stop counting for the HW)."""
        del self._in_doubt[partition]
        callbacks = self._when_resolved.pop(partition, ())
        if release_joiners:
            for on_done in callbacks:
                on_done()

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
                self.store.notify_isr_change(changed[i:i + NOTIFY_MAX_PARTITIONS])
        except (ZkError, OSError) as e:
            log.warning("Could not write an ISR change notification (%s); will retry", error_text(e))
            return
        self._pending.difference_update(changed)
