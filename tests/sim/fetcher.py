"""A follower's replica fetcher for one partition, as a state machine over simulated messages.

It does what ``kafka_ha.broker.replica_fetcher.ReplicaFetcher`` does, one
request at a time, with each request and answer a network message:

- after every LeaderAndIsr that makes it a follower (``start``), it asks the
  leader OffsetsForLeaderEpoch for its latest epoch and truncates where
  :func:`kafka_ha.broker.truncation.decide_truncation` says, asking again with
  its new latest epoch for as long as the decision is not complete;
- then it fetches from its LEO; the leader's real ``DataApis.fetch`` serves the
  request (calling ``Partition.on_follower_fetch`` before reading, as it does
  for every follower fetch) and the answer's records are appended with
  ``Partition.append_as_follower``, its HW taken with ``set_follower_high_watermark``;
- OFFSET_OUT_OF_RANGE is handled as the real fetcher does: ListOffsets(earliest)
  to the leader, then start over at the leader's log start if our LEO is below
  it, otherwise truncate again;
- other errors (the leader is not, or not yet, the leader) back off and retry.

A LeaderAndIsr in between (``stop``/``start``) makes every answer still on its
way stale: the real fetcher drops answers for partitions it no longer fetches.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka_ha.broker.truncation import decide_truncation
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode, error_name
from kafka_ha.protocol.file_region import FileRegions
from kafka_ha.records.errors import RecordsError

if TYPE_CHECKING:
    from tests.sim.broker import BrokerProcess

FETCH_VERSION = 9          # no fetch sessions (one partition per fetcher here); KIP-320 fencing
EPOCH_VERSION = 2
BACKOFF_MS = 500           # replica_fetcher.BACKOFF_S
EPOCH_RETRY_MS = 100       # replica_fetcher: BACKOFF_S / 5 while the leader is not ready
MAX_BYTES = 16 * 1024      # below the sendfile threshold: answers are bytes
# The log refuses a follower append larger than a segment (RecordSetTooLargeError), and the
# real fetcher asks for replica.fetch.max.bytes (1 MB) whatever segment.bytes is: with small
# segments it would never catch up.  The runs with small segments fetch at most a segment.


def _materialize(records) -> bytes:
    """The answer leaves the leader now: FileRegions (sendfile) become bytes."""
    if isinstance(records, FileRegions):
        try:
            return records.read()
        finally:
            records.close()
    return bytes(records or b"")


class SimFetcher:
    def __init__(self, process: BrokerProcess, tp: TopicPartition) -> None:
        self.process = process
        self.tp = tp
        self.leader: int | None = None
        self.state = "idle"            # idle | truncating | fetching | listing
        self.generation = 0
        self.truncation_rounds = 0

    @property
    def _world(self):
        return self.process.world

    def _partition(self):
        return self.process.rm.partitions.get(self.tp)

    def start(self, leader: int) -> None:
        self.generation += 1
        self.leader, self.state = leader, "truncating"
        self._next(0)

    def fetch_on(self, leader: int) -> bool:
        """As ``ReplicaFetcher.fetch_on``: the same leader in its next epoch keeps this
        fetcher where it is (truncating or fetching); its next request names the new epoch."""
        if self.state == "idle" or self.leader != leader:
            return False
        self._world.stats["epoch changes fetched on without truncating"] += 1
        return True

    def stop(self) -> None:
        self.generation += 1
        self.leader, self.state = None, "idle"

    def _next(self, delay_ms: int) -> None:
        generation = self.generation
        self._world.sched.at(delay_ms, lambda: self._send(generation),
                             f"B{self.process.broker_id} fetcher {self.tp}")

    def _send(self, generation: int) -> str | None:
        if generation != self.generation or not self.process.alive or self.state == "idle":
            return "stale wakeup"
        p = self._partition()
        if p is None:
            return "no partition"
        net, timeout = self._world.net, self._world.params.request_timeout_ms
        max_bytes = min(MAX_BYTES, self._world.params.segment_bytes)
        me, tp = self.process.broker_id, self.tp

        def answered(fn):
            def on_response(response):
                if generation != self.generation:
                    return "stale answer ignored"
                return fn(response)
            return on_response

        def failed():
            if generation != self.generation:
                return "stale failure ignored"
            self._next(BACKOFF_MS)
            return "request failed; backing off"

        if self.state == "truncating":
            epoch = p.log.latest_epoch()
            request = {"topics": [{"topic": tp.topic, "partitions": [
                {"partition": tp.partition, "current_leader_epoch": p.leader_epoch,
                 "leader_epoch": epoch}]}]}
            asked_in = p.leader_epoch

            def answer(leader):
                lp = leader.partition(tp)
                if lp is not None and lp.is_leader and lp.leader_epoch < asked_in:
                    self._world.stats["epoch questions answered by a stale leader"] += 1
                    self._world.note(f"{leader} answers as leader of epoch {lp.leader_epoch}; "
                                     f"B{me} follows it in epoch {asked_in}")
                return leader.data_apis.offsets_for_leader_epoch(request, EPOCH_VERSION)
            net.request(self.process, self.leader, answer,
                        answered(lambda r: self._on_epoch_answer(r, asked_in)), failed, timeout,
                        f"B{me} OffsetsForLeaderEpoch({tp}, epoch {epoch})")
            return f"asks B{self.leader} where epoch {epoch} ends"
        if self.state == "fetching":
            offset = p.log.log_end_offset
            request = {"replica_id": me, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes,
                       "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                       "forgotten_topics_data": [], "topics": [{"topic": tp.topic, "partitions": [
                           {"partition": tp.partition, "current_leader_epoch": p.leader_epoch,
                            "fetch_offset": offset,
                            "log_start_offset": p.log.log_start_offset,
                            "partition_max_bytes": max_bytes}]}]}
            sent_in = p.leader_epoch
            net.request(self.process, self.leader, lambda leader: self._serve_fetch(leader, request),
                        answered(lambda r: self._on_fetch_answer(r, sent_in)), failed, timeout,
                        f"B{me} Fetch({tp}, offset {offset})")
            return f"fetches from B{self.leader} at offset {offset}"
        request = {"replica_id": me, "topics": [{"name": tp.topic, "partitions": [
            {"partition_index": tp.partition, "timestamp": -2}]}]}
        net.request(self.process, self.leader, lambda leader: leader.data_apis.list_offsets(request, 1),
                    answered(self._on_list_answer), failed, timeout, f"B{me} ListOffsets({tp}, earliest)")
        return f"asks B{self.leader} for its log start"

    @staticmethod
    def _serve_fetch(leader: BrokerProcess, request: dict) -> dict:
        part = request["topics"][0]["partitions"][0]
        p = leader.partition(TopicPartition(request["topics"][0]["topic"], part["partition"]))
        if p is not None and p.is_leader and part["fetch_offset"] > p.log.log_end_offset:
            leader.world.stats["fetches beyond the leader's LEO"] += 1
        response = leader.data_apis.fetch(request, FETCH_VERSION)
        for topic in response["responses"]:
            for entry in topic["partitions"]:
                entry["records"] = _materialize(entry["records"])
        return response

    # ---- answers -------------------------------------------------------------

    def _on_epoch_answer(self, response: dict, asked_in: int) -> str:
        entry = response["topics"][0]["partitions"][0]
        if entry["error_code"] == ErrorCode.FENCED_LEADER_EPOCH:
            return self._fenced(asked_in)
        if entry["error_code"] != ErrorCode.NONE:
            self._next(EPOCH_RETRY_MS)
            return f"leader not ready ({error_name(entry['error_code'])}); asking again"
        p = self._partition()
        leader_epoch, leader_end = entry["leader_epoch"], entry["end_offset"]
        leo = p.log.log_end_offset
        own = p.log.end_offset_for_epoch(leader_epoch) if leader_epoch >= 0 else (-1, -1)
        decision = decide_truncation(leader_epoch, leader_end, own, leo, p.high_watermark,
                                     p.log.log_start_offset)
        self.truncation_rounds += 1
        if own[0] >= 0 and leader_epoch >= 0 and own[0] != leader_epoch:
            # The leader's answer names an epoch this follower never had: the case a
            # single round of KIP-279 truncation can get wrong.
            self._world.stats["epoch answers unknown to the follower"] += 1
        said = f"leader says epoch {leader_epoch} ends at {leader_end}"
        if decision.offset < leo:
            self._world.stats["truncations that cut data"] += 1
        # Also when nothing is cut, as the fetcher does: the log drops an epoch that starts
        # at its end (one this broker led without appending), or the next round asks for it again.
        p.truncate_to(decision.offset)
        if p.log.log_end_offset < leo:
            said += f"; truncated {leo} -> {p.log.log_end_offset}"
        if decision.complete:
            self.state = "fetching"
            said += "; fetching"
            for hook in self._world.on_truncated:
                hook(self.process, self.tp, self.leader)
        else:
            said += "; asking again"
        self._next(0)
        return said

    def _on_fetch_answer(self, response: dict, sent_in: int) -> str:
        entry = response["responses"][0]["partitions"][0]
        error = entry["error_code"]
        p = self._partition()
        if error == ErrorCode.NONE:
            records = entry["records"]
            before = p.log.log_end_offset
            if records:
                try:
                    p.append_as_follower(records)
                except RecordsError as e:
                    # The real fetcher's loop catches it (ValueError), closes and backs off.
                    self._next(BACKOFF_MS)
                    return f"append failed: {e}"
            p.set_follower_high_watermark(entry["high_watermark"])
            got = p.log.log_end_offset - before
            self._next(0 if got else self._world.idle_fetch_delay())
            return (f"+{got} -> LEO {p.log.log_end_offset}, HW {p.high_watermark} "
                    f"(leader HW {entry['high_watermark']})")
        if error == ErrorCode.FENCED_LEADER_EPOCH:
            return self._fenced(sent_in)
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._world.stats["fetches out of range"] += 1
            self.state = "listing"
            self._next(0)
            return f"OFFSET_OUT_OF_RANGE at {p.log.log_end_offset}"
        self._next(BACKOFF_MS)
        return f"{error_name(error)}; backing off"

    def _fenced(self, sent_in: int) -> str:
        """As replica_fetcher: out of the fetcher until the LeaderAndIsr of the new epoch,
        unless that came while the request was out (it fetched on): then ask again in it."""
        if self._partition().leader_epoch > sent_in:
            self._world.stats["fenced in an epoch already left"] += 1
            self._next(0)
            return f"FENCED_LEADER_EPOCH for epoch {sent_in}, left meanwhile: asking again"
        self._world.stats["fenced by a newer leader epoch"] += 1
        self.generation += 1
        self.state = "idle"
        return "FENCED_LEADER_EPOCH: waiting for the LeaderAndIsr of the new epoch"

    def _on_list_answer(self, response: dict) -> str:
        part = response["topics"][0]["partitions"][0]
        if part["error_code"] != ErrorCode.NONE:
            self.state = "fetching"
            self._next(BACKOFF_MS)
            return f"ListOffsets failed: {error_name(part['error_code'])}"
        p = self._partition()
        leader_start = part["offset"]
        if p.log.log_end_offset < leader_start:
            p.truncate_fully_and_start_at(leader_start)
            self.state = "fetching"
            self._next(0)
            return f"LEO below the leader's log start {leader_start}: starting over there"
        # Above the leader's LEO: truncation was skipped or is stale; redo it.
        self.state = "truncating"
        self._next(0)
        return f"LEO {p.log.log_end_offset} is beyond the leader's log; truncating again"
