"""The controller's fenced writes: every write of a controller term checks its epoch first.

Each write goes into a multi whose first op checks the version of
``/controller_epoch`` that the term's election wrote (the fence).  A failed
check means another controller has been elected since, and raises
``ControllerMoved`` so that this one resigns (KAFKA-6082); outside a term
(before the election, after resigning) nothing is written at all.

Partition states are written in batches: pipelined multis of up to a thousand
ops, each partition sorted into written, conflict (its znode changed
underneath: re-read and decide again) or failed.  ``ControllerStore`` is built
on ``FencedWrites`` and adds the election and the reads.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kafka_ha.model import LeaderAndIsr, TopicPartition
from kafka_ha.zk import znodes as zn
from kafka_ha.zk.errors import (ZkBadVersion, ZkConnectionLost, ZkNodeExists, ZkNoNode, ZkRolledBack,
                                error_text)
from kafka_ha.zk.session_bound import SessionBoundClient

log = logging.getLogger("kafka_ha.controller")

# ZooKeeper refuses requests over jute.maxbuffer (1 MiB); a state set op is
# about 150 bytes, so 1,000 ops per multi stays far below it.
MULTI_CHUNK = 1000


_CONFLICT = object()  # the znode changed underneath: re-read and decide again
_RETRY = object()  # rolled back because another op of the multi failed


class ControllerMoved(Exception):
    """Another broker is the controller now (or this one resigned); it must not write."""


@dataclass
class WriteResult:
    """Outcome of a batch of conditional writes, per partition."""

    written: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    conflicts: list[TopicPartition] = field(default_factory=list)
    failed: dict[TopicPartition, str] = field(default_factory=dict)


class FencedWrites:
    def __init__(self, client: SessionBoundClient) -> None:
        self.zk = client
        # The version of /controller_epoch that this broker's election wrote, which every
        # write of its term checks; None outside a term (before the election, after resigning).
        self.epoch_zk_version: int | None = None

    # ---- single znodes ---------------------------------------------------

    def fenced_set(self, path: str, data: bytes) -> None:
        txn = self.zk.transaction()
        txn.check(zn.ControllerEpochZNode.PATH, self._fence())
        txn.set_data(path, data)
        results = txn.commit()
        self._raise_if_fenced(results)
        if isinstance(results[1], Exception):
            raise results[1]

    def fenced_delete(self, path: str, version: int = -1) -> bool:
        """Delete a znode as the controller; False if it was already gone."""
        results = self._fenced_deletes([path], version).commit()
        self._raise_if_fenced(results)
        return not isinstance(results[1], Exception)

    def _fenced_deletes(self, paths: list[str], version: int = -1):
        txn = self.zk.transaction()
        txn.check(zn.ControllerEpochZNode.PATH, self._fence())
        for path in paths:
            txn.delete(path, version=version)
        return txn

    # ---- partition states -------------------------------------------------

    def update_states(self, updates: dict[TopicPartition, LeaderAndIsr]) -> WriteResult:
        """Conditionally rewrite states at the ``zk_version`` each value carries."""
        return self.collect([self.submit_updates(updates)])

    def submit_updates(self, updates: dict[TopicPartition, LeaderAndIsr],
                       checks: dict[TopicPartition, LeaderAndIsr] | None = None) -> list:
        """Send the fenced multis for these updates without waiting; see ``collect``.

        ``checks`` are states the caller decided to leave as they are: each adds
        a version check, so a stale cached version shows up as a conflict.
        Sending without waiting lets the caller decide the next slice of
        partitions while ZooKeeper applies this one.
        """
        units = [(tp, lai, [("set", zn.TopicPartitionStateZNode.path(*tp),
                             zn.TopicPartitionStateZNode.encode(lai), lai.zk_version)])
                 for tp, lai in updates.items()]
        units += [(tp, lai, [("check", zn.TopicPartitionStateZNode.path(*tp), None, lai.zk_version)])
                  for tp, lai in (checks or {}).items()]
        return self._submit(units)

    def create_states(self, creates: dict[TopicPartition, LeaderAndIsr]) -> WriteResult:
        """Create state znodes with their data-less parents; an existing state is a conflict.

        The parents go into the same fenced multi as the states: one
        ZooKeeper transaction per thousand partitions instead of three.
        """
        existing = self._existing_partition_nodes({tp.topic for tp in creates})
        units = []
        for tp, lai in creates.items():
            ops = []
            known = existing.get(tp.topic)
            if known is None:
                ops.append(("create", zn.TopicPartitionsZNode.path(tp.topic), b"", -1))
                known = existing[tp.topic] = set()
            if tp.partition not in known:
                ops.append(("create", zn.TopicPartitionZNode.path(*tp), b"", -1))
                known.add(tp.partition)
            ops.append(("create", zn.TopicPartitionStateZNode.path(*tp),
                        zn.TopicPartitionStateZNode.encode(lai), -1))
            units.append((tp, lai, ops))
        return self.collect([self._submit(units)])

    def _existing_partition_nodes(self, topics: set[str]) -> dict[str, set[int] | None]:
        """Partition ids under each topic's ``partitions`` node; None if that node is missing."""
        paths = {zn.TopicPartitionsZNode.path(t): t for t in topics}
        return {paths[path]: None if children is None else {int(c) for c in children if c.isdigit()}
                for path, children in self.zk.get_children_many(paths).items()}

    def _submit(self, units: list) -> list:
        """Send units of ops (each unit one partition's writes) as pipelined fenced multis."""
        chunks: list[list] = [[]]
        ops_in_chunk = 0
        for unit in units:
            if chunks[-1] and ops_in_chunk + len(unit[2]) > MULTI_CHUNK:
                chunks.append([])
                ops_in_chunk = 0
            chunks[-1].append(unit)
            ops_in_chunk += len(unit[2])
        submitted = []
        for chunk in chunks:
            if chunk:
                submitted.append((chunk, self._fenced_txn(chunk).commit_async()))
                # Yield so kazoo's connection greenlet sends it now, while the
                # caller goes on deciding the next slice.
                self.zk.handler.sleep_func(0)
        return submitted

    def collect(self, submissions: list[list]) -> WriteResult:
        """Wait for submitted multis and sort every partition into written, conflict or failed.

        ZooKeeper reports only the first failing op of a failed multi; the other
        units were rolled back, and they go again in multis without the failed
        one, until none fails.  (They used to go again as one transaction per
        partition: with a stale partition in every multi, as right after leaders
        expanded their ISRs, a controlled shutdown at 10k partitions waited 23 s
        for ZooKeeper to take 10,000 transactions.)  Each round settles at least
        the unit that failed in each multi, so the rounds end.
        """
        result = WriteResult()
        pending = [sent for submitted in submissions for sent in submitted]
        while pending:
            rolled_back = []
            for chunk, async_result in pending:
                outcomes = self._unit_outcomes(chunk, async_result)
                if all(outcome is _RETRY for _, outcome in outcomes):
                    # A multi that failed with no unit to blame (not expected of
                    # ZooKeeper): its partitions are re-read as conflicts instead.
                    outcomes = [(unit, _CONFLICT) for unit, _ in outcomes]
                for unit, outcome in outcomes:
                    if outcome is _RETRY:
                        rolled_back.append(unit)
                    else:
                        self._record(result, unit, outcome)
            pending = self._submit(rolled_back) if rolled_back else []
        return result

    def _unit_outcomes(self, chunk: list, async_result) -> list:
        """(unit, outcome) for each unit: a version, _CONFLICT, _RETRY or an error text."""
        try:
            results = async_result.get()
        except ZkConnectionLost as e:
            # Not sent again (no session to tie it to): it may or may not have been
            # applied; the caller re-reads conflicts and compares content (KAFKA-1382).
            log.warning("Lost the reply to a batch of %d partition writes (%s); re-reading them",
                        len(chunk), type(e).__name__)
            return [(unit, _CONFLICT) for unit in chunk]
        self._raise_if_fenced(results)
        ok = not any(isinstance(r, Exception) for r in results)
        outcomes, i = [], 1
        for unit in chunk:
            unit_results = results[i:i + len(unit[2])]
            i += len(unit[2])
            last = unit_results[-1]
            if ok:
                if unit[2][-1][0] == "check":
                    outcomes.append((unit, unit[1].zk_version))  # unchanged, version confirmed
                else:
                    outcomes.append((unit, last.version if hasattr(last, "version") else 0))
                continue
            failure = next((r for r in unit_results if isinstance(r, Exception)
                            and not isinstance(r, ZkRolledBack)), None)
            if failure is None:
                outcomes.append((unit, _RETRY))
            elif isinstance(failure, (ZkBadVersion, ZkNoNode, ZkNodeExists)):
                outcomes.append((unit, _CONFLICT))
            else:
                outcomes.append((unit, error_text(failure)))
        return outcomes

    @staticmethod
    def _record(result: WriteResult, unit: tuple, outcome: object) -> None:
        tp, lai, _ = unit
        if outcome is _CONFLICT:
            result.conflicts.append(tp)
        elif isinstance(outcome, str):
            result.failed[tp] = outcome
        else:
            result.written[tp] = lai.with_zk_version(outcome)

    def _fenced_txn(self, units: list):
        txn = self.zk.transaction()
        txn.check(zn.ControllerEpochZNode.PATH, self._fence())
        for _, _, ops in units:
            for kind, path, data, version in ops:
                if kind == "create":
                    txn.create(path, data)
                elif kind == "check":
                    txn.check(path, version)
                else:
                    txn.set_data(path, data, version=version)
        return txn

    # ---- the fence ---------------------------------------------------------

    def _fence(self) -> int:
        if self.epoch_zk_version is None:
            raise ControllerMoved("this broker is not the controller: it has not won an "
                                  "election since it last resigned")
        return self.epoch_zk_version

    def _raise_if_fenced(self, results: list) -> None:
        if isinstance(results[0], (ZkBadVersion, ZkNoNode)):
            raise ControllerMoved(
                f"/controller_epoch is no longer at version {self.epoch_zk_version}: "
                f"another controller has been elected")
