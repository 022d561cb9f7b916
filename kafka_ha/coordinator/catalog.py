"""Which groups this broker coordinates: those whose ``__consumer_offsets``
partition it leads, loaded from that partition's log.

A partition is *owned* once loaded for the leader epoch it is led in; while it
loads, its groups answer COORDINATOR_LOAD_IN_PROGRESS, and once it is no longer
led here (or is led in a newer epoch, which may follow another broker's
leadership), its groups are dropped and answer NOT_COORDINATOR.  ``refresh()``
compares what is led with what is owned; it runs after each LeaderAndIsr and
on the coordinator's timer, and ``status()`` re-checks one partition on every
request, so a leadership change is seen even between the two.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import gevent

from kafka_ha.clock import monotonic_ms, now_ms
from kafka_ha.coordinator import offsets_log
from kafka_ha.coordinator.group_state import Group, Outcome
from kafka_ha.coordinator.offsets_records import OffsetValue
from kafka_ha.coordinator.placement import OFFSETS_TOPIC, partition_for
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class GroupCatalog:
    def __init__(self, hosted: Any, partition_count: Callable[[], int],
                 initial_rebalance_delay_ms: int,
                 on_unload: Callable[[Group, Outcome], None],
                 append: offsets_log.AppendAcksAll | None = None,
                 pause: Callable[[], None] = lambda: gevent.sleep(0)) -> None:
        """``hosted.get(tp)``: this broker's replica of a partition (``is_leader``,
        ``leader_epoch``, ``log``) or None; ``append``: the broker's acks=-1 append;
        ``pause``: a yield that lets the event loop poll I/O (long loads)."""
        self.hosted = hosted
        self._append = append
        self._pause = pause
        self._partition_count = partition_count
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self._on_unload = on_unload
        self.owned: dict[int, int] = {}       # partition -> leader epoch it was loaded for
        self.loading: dict[int, int] = {}     # partition -> leader epoch being loaded
        self.groups: dict[str, Group] = {}
        self.offsets: dict[str, dict[tuple[str, int], OffsetValue]] = {}

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self._partition_count())

    def _led_epoch(self, partition: int) -> int | None:
        p = self.hosted.get(TopicPartition(OFFSETS_TOPIC, partition))
        return p.leader_epoch if p is not None and p.is_leader else None

    def status(self, group_id: str) -> int:
        """NONE if this broker coordinates the group now, else the error to answer."""
        partition = self.partition_of(group_id)
        epoch = self._led_epoch(partition)
        if epoch is None:
            if partition in self.owned:
                self._unload(partition)
            return ErrorCode.NOT_COORDINATOR
        if self.owned.get(partition) == epoch:
            return ErrorCode.NONE
        self._start_load(partition, epoch)
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    def refresh(self) -> None:
        for partition in list(self.owned):
            if self._led_epoch(partition) != self.owned[partition]:
                self._unload(partition)
        for partition in range(self._partition_count()):
            epoch = self._led_epoch(partition)
            if epoch is not None and self.owned.get(partition) != epoch:
                self._start_load(partition, epoch)

    def _start_load(self, partition: int, epoch: int) -> None:
        if self.loading.get(partition) == epoch:
            return
        if partition in self.owned:
            self._unload(partition)
        self.loading[partition] = epoch
        gevent.spawn(self._load, partition, epoch)

    def _load(self, partition: int, epoch: int) -> None:
        started = now_ms()
        log.info("Scheduling loading of offsets and group metadata from %s-%d (leader epoch %d)",
                 OFFSETS_TOPIC, partition, epoch)

        def still_wanted() -> bool:
            return self.loading.get(partition) == epoch and self._led_epoch(partition) == epoch
        try:
            state = offsets_log.load(self.hosted, partition, still_wanted, self._pause)
        except Exception:   # a broker never dies of a bad log: the partition stays unowned
            log.exception("Loading %s-%d failed", OFFSETS_TOPIC, partition)
            state = None
        wanted = state is not None and still_wanted()
        if self.loading.get(partition) == epoch:
            del self.loading[partition]
        if not wanted:
            return
        # The members' sessions start now on the coordinator's clock, the monotonic one
        # (with the wall clock's, a member that never came back would never expire).
        now = monotonic_ms()
        count = self._partition_count()
        for group_id, value in state.groups.items():
            if partition_for(group_id, count) == partition and value is not None:
                self.groups[group_id] = Group.from_record(group_id, value, now,
                                                          self.initial_rebalance_delay_ms)
        for group_id, offsets in state.offsets.items():
            if partition_for(group_id, count) == partition and offsets:
                self.offsets[group_id] = offsets
                if group_id not in self.groups:
                    self.groups[group_id] = Group(group_id, self.initial_rebalance_delay_ms)
        self.owned[partition] = epoch
        log.info("Finished loading offsets and group metadata from %s-%d in %d milliseconds",
                 OFFSETS_TOPIC, partition, now_ms() - started)

    def _unload(self, partition: int) -> None:
        self.owned.pop(partition, None)
        self.loading.pop(partition, None)
        count = self._partition_count()
        gone = [g for g in self.groups if partition_for(g, count) == partition]
        offsets = 0
        for group_id in gone:
            group = self.groups.pop(group_id)
            offsets += len(self.offsets.pop(group_id, {}))
            self._on_unload(group, group.unload())
        log.info("Finished unloading %s-%d. Removed %d cached offsets and %d cached groups.",
                 OFFSETS_TOPIC, partition, offsets, len(gone))

    def write(self, group_id: str, records: list[tuple[bytes, bytes | None]],
              timeout_s: float) -> int:
        """Append records to the group's offsets partition, acks=-1: the client's error code."""
        tp = TopicPartition(OFFSETS_TOPIC, self.partition_of(group_id))
        return offsets_log.client_error(self._append(tp, offsets_log.batch_of(records), timeout_s))

    def group(self, group_id: str, create: bool = False) -> Group | None:
        group = self.groups.get(group_id)
        if group is None and create:
            group = self.groups[group_id] = Group(group_id, self.initial_rebalance_delay_ms)
        return group
