"""The coordinator's handlers and offset expiry over a real catalog, with the broker's
append path faked."""
import types

import gevent

from kafka_ha.coordinator import offsets_records as rec
from kafka_ha.coordinator.catalog import GroupCatalog
from kafka_ha.coordinator.coordinator import GroupCoordinator
from kafka_ha.coordinator.offset_apis import OffsetApis
from kafka_ha.coordinator.placement import OFFSETS_TOPIC, partition_for
from kafka_ha.log.config import LogConfig
from kafka_ha.log.log import Log
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.records.reader import decode_records
from tests.unit.test_group_catalog import Hosted, Led

CONFIG = {"group.min.session.timeout.ms": 1000, "group.max.session.timeout.ms": 60000,
          "offsets.commit.timeout.ms": 1000, "offset.metadata.max.bytes": 4096,
          "offsets.retention.minutes": 1}
GROUP = "g"


def coordinator(tmp_path, append_error):
    p = partition_for(GROUP, 4)
    tp = TopicPartition(OFFSETS_TOPIC, p)
    hosted = Hosted()
    hosted.partitions[tp] = Led(Log(str(tmp_path / "log"), tp, LogConfig()))
    appended = []

    def append(tp_, batch, timeout_s):
        appended.append(tp_)
        batches.append(batch)
        return append_error
    batches = []
    catalog = GroupCatalog(hosted, lambda: 4, 0, lambda g, o: None, append)
    catalog.refresh()
    gevent.sleep(0.1)
    c = GroupCoordinator(CONFIG, catalog, lambda partition: (ErrorCode.NONE, None))
    c.batches = batches
    return c, appended


def join_and_sync(c):
    joined = c.join_group({"group_id": GROUP, "session_timeout_ms": 6000,
                           "rebalance_timeout_ms": 6000, "member_id": "",
                           "protocol_type": "consumer",
                           "protocols": [{"name": "range", "metadata": b""}]}, 1)
    assert joined["error_code"] == ErrorCode.NONE
    member = joined["member_id"]
    return c.sync_group({"group_id": GROUP, "generation_id": joined["generation_id"],
                         "member_id": member,
                         "assignments": [{"member_id": member, "assignment": b"A"}]}, 1)


def test_the_leaders_sync_is_answered_after_the_group_record_is_written(tmp_path):
    c, appended = coordinator(tmp_path, ErrorCode.NONE)
    synced = join_and_sync(c)
    assert synced["error_code"] == ErrorCode.NONE and synced["assignment"] == b"A"
    assert appended == [TopicPartition(OFFSETS_TOPIC, partition_for(GROUP, 4))]


def test_a_failed_group_write_fails_the_leaders_sync_too(tmp_path):
    c, _ = coordinator(tmp_path, ErrorCode.NOT_ENOUGH_REPLICAS)
    synced = join_and_sync(c)
    assert synced["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert synced["assignment"] == b""


def commit(c, retention_ms, generation=-1, member=""):
    offsets = OffsetApis(CONFIG, c.catalog, None, lambda topic, partition: True)
    response = offsets.commit({"group_id": GROUP, "generation_id": generation,
                               "member_id": member, "retention_time_ms": retention_ms,
                               "topics": [{"name": "t", "partitions": [
                                   {"partition_index": 0, "committed_offset": 5,
                                    "committed_metadata": ""}]}]}, 2)
    assert response["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE


def written(batch):
    return [(rec.decode_key(r.key), r.value) for r in decode_records(batch)]


def test_expired_offsets_of_an_empty_group_are_deleted_with_tombstones(tmp_path):
    c, _ = coordinator(tmp_path, ErrorCode.NONE)
    commit(c, retention_ms=1000)
    committed_at = c.catalog.offsets[GROUP][("t", 0)].commit_timestamp
    assert c.expire_offsets(committed_at + 999) == 0
    assert c.expire_offsets(committed_at + 1000) == 1
    assert GROUP not in c.catalog.offsets and GROUP not in c.catalog.groups
    assert written(c.batches[-1]) == [(rec.OffsetKey(GROUP, "t", 0), None),
                                      (rec.GroupKey(GROUP), None)]


def test_a_group_with_members_keeps_its_offsets(tmp_path):
    c, _ = coordinator(tmp_path, ErrorCode.NONE)
    join_and_sync(c)
    group = c.catalog.group(GROUP)
    member = next(iter(group.members))
    commit(c, retention_ms=1000, generation=group.generation, member=member)
    committed_at = c.catalog.offsets[GROUP][("t", 0)].commit_timestamp
    assert c.expire_offsets(committed_at + 10 ** 9) == 0
    assert ("t", 0) in c.catalog.offsets[GROUP]


def delete(c, *groups):
    response = c.delete_groups({"groups_names": list(groups)}, 1)
    return [r["error_code"] for r in response["results"]]


def test_deleting_an_empty_group_writes_tombstones_for_its_offsets_and_metadata(tmp_path):
    c, _ = coordinator(tmp_path, ErrorCode.NONE)
    commit(c, retention_ms=60000)
    assert delete(c, GROUP) == [ErrorCode.NONE]
    assert written(c.batches[-1]) == [(rec.OffsetKey(GROUP, "t", 0), None),
                                      (rec.GroupKey(GROUP), None)]
    assert GROUP not in c.catalog.groups and GROUP not in c.catalog.offsets
    assert delete(c, GROUP) == [ErrorCode.GROUP_ID_NOT_FOUND]


def test_a_group_with_members_or_an_unknown_group_is_not_deleted(tmp_path):
    c, _ = coordinator(tmp_path, ErrorCode.NONE)
    join_and_sync(c)
    writes = len(c.batches)
    assert delete(c, GROUP, "nobody", "") == [ErrorCode.NON_EMPTY_GROUP,
                                             ErrorCode.GROUP_ID_NOT_FOUND,
                                             ErrorCode.INVALID_GROUP_ID]
    assert len(c.batches) == writes and c.catalog.groups[GROUP].members


def test_a_group_whose_tombstones_were_not_written_lives_on(tmp_path):
    c, _ = coordinator(tmp_path, ErrorCode.NONE)
    commit(c, retention_ms=60000)
    c.catalog._append = lambda tp, batch, timeout_s: ErrorCode.NOT_ENOUGH_REPLICAS
    assert delete(c, GROUP) == [ErrorCode.COORDINATOR_NOT_AVAILABLE]
    assert c.catalog.groups[GROUP].state.value == "Empty"
    assert c.catalog.offsets[GROUP][("t", 0)].offset == 5


def test_offset_commit_v6_leader_epoch_comes_back_from_offset_fetch_v5(tmp_path):
    """KIP-320: the committed leader epoch travels with the offset; v5 commits
    carry no retention time (the broker's offsets.retention.minutes applies)."""
    c, _ = coordinator(tmp_path, ErrorCode.NONE)
    nothing_in_zookeeper = types.SimpleNamespace(fetch=lambda request, version: {"topics": []})
    offsets = OffsetApis(CONFIG, c.catalog, nothing_in_zookeeper, lambda topic, partition: True)
    committed = offsets.commit({"group_id": GROUP, "generation_id": -1, "member_id": "",
                                "topics": [{"name": "t", "partitions": [
                                    {"partition_index": 0, "committed_offset": 9,
                                     "committed_leader_epoch": 4, "committed_metadata": "m"},
                                    {"partition_index": 1, "committed_offset": 3,
                                     "committed_leader_epoch": -1, "committed_metadata": None}]}]},
                               6)
    assert [p["error_code"] for p in committed["topics"][0]["partitions"]] == [0, 0]
    fetched = offsets.fetch({"group_id": GROUP, "topics": [
        {"name": "t", "partition_indexes": [0, 1, 2]}]}, 5)
    assert [(p["committed_offset"], p["committed_leader_epoch"], p["metadata"])
            for p in fetched["topics"][0]["partitions"]] == [(9, 4, "m"), (3, -1, ""), (-1, -1, "")]
    value = c.catalog.offsets[GROUP][("t", 0)]
    retention = CONFIG["offsets.retention.minutes"] * 60000
    assert value.expire_timestamp - value.commit_timestamp == retention
    # On the offsets topic: value v3 (with the epoch) where the commit named one, else v1.
    records = dict(written(c.batches[-1]))
    assert [data[:2] for data in records.values()] == [b"\x00\x03", b"\x00\x01"]
    # A coordinator that loads them back has the epoch, and expires the v3 value
    # (no expire timestamp of its own) at commit time + offsets.retention.minutes.
    loaded = {(k.topic, k.partition): rec.decode_offset_value(v) for k, v in records.items()}
    assert loaded[("t", 0)].leader_epoch == 4 and loaded[("t", 0)].expire_timestamp == -1
    c.catalog.offsets[GROUP] = loaded
    assert c.expire_offsets(value.commit_timestamp + retention - 1) == 0
    assert c.expire_offsets(value.commit_timestamp + retention) == 2
