"""Which groups a broker coordinates: loading an offsets partition from its log when
it becomes leader here, and dropping its groups when it no longer is."""
import gevent

from kafka_ha.coordinator import offsets_records as rec
from kafka_ha.coordinator.catalog import GroupCatalog
from kafka_ha.coordinator.group_state import GroupState
from kafka_ha.coordinator.placement import OFFSETS_TOPIC, partition_for
from kafka_ha.log.config import LogConfig
from kafka_ha.log.log import Log
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.records.builder import Record, build_v2_batch

PARTITIONS = 4


class Led:
    """What the catalog reads of a hosted partition: its role, epoch and log."""

    def __init__(self, log_):
        self.log = log_
        self.is_leader = True
        self.leader_epoch = 1


class Hosted:
    def __init__(self):
        self.partitions = {}

    def get(self, tp):
        return self.partitions.get(tp)


def offsets_log(tmp_path, partition, records):
    tp = TopicPartition(OFFSETS_TOPIC, partition)
    log_ = Log(str(tmp_path / f"{OFFSETS_TOPIC}-{partition}"), tp, LogConfig(segment_bytes=300))
    for key, value in records:   # small segments: the load reads across several
        log_.append_as_leader(build_v2_batch([Record(key, value)]), 1)
    return tp, log_


def group_record(group_id, members):
    return {"protocol_type": "consumer", "generation": 4, "protocol": "range", "leader": "m1",
            "current_state_timestamp": 0, "members": [
                {"member_id": m, "client_id": "c", "client_host": "h", "rebalance_timeout": 1000,
                 "session_timeout": 1000, "subscription": b"", "assignment": b"a"}
                for m in members]}


def test_load_on_leadership_and_unload_when_it_goes(tmp_path):
    group = "payments"
    p = partition_for(group, PARTITIONS)
    value = rec.offset_value(rec.OffsetValue(5, "", 0, -1))
    newer = rec.offset_value(rec.OffsetValue(9, "m", 0, -1))
    tp, log_ = offsets_log(tmp_path, p, [
        (rec.offset_key(group, "t", 0), value),
        (rec.offset_key(group, "t", 1), value),
        (rec.group_key(group), rec.group_value(group_record(group, ["m1", "m2"]))),
        (rec.offset_key(group, "t", 0), newer),       # the last record of a key wins
        (rec.offset_key(group, "t", 1), None),        # a tombstone removes
        (rec.offset_key("gone", "t", 0), value),
        (rec.group_key("gone"), None),                # a deleted group takes its offsets along
    ])
    hosted = Hosted()
    unloaded = []
    catalog = GroupCatalog(hosted, lambda: PARTITIONS, 0, lambda g, o: unloaded.append(g.group_id))
    assert catalog.status(group) == ErrorCode.NOT_COORDINATOR
    hosted.partitions[tp] = led = Led(log_)
    assert catalog.status(group) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    gevent.sleep(0.2)   # the load runs on its own greenlet
    assert catalog.status(group) == ErrorCode.NONE
    assert catalog.offsets[group] == {("t", 0): rec.OffsetValue(9, "m", 0, -1)}
    loaded = catalog.group(group)
    assert loaded.state == GroupState.STABLE and set(loaded.members) == {"m1", "m2"}
    assert loaded.generation == 4
    assert "gone" not in catalog.offsets and "gone" not in catalog.groups
    led.is_leader = False
    assert catalog.status(group) == ErrorCode.NOT_COORDINATOR
    assert unloaded == [group] and loaded.state == GroupState.DEAD
    assert group not in catalog.offsets


def test_a_newer_leader_epoch_reloads(tmp_path):
    group = "orders"
    p = partition_for(group, PARTITIONS)
    tp, log_ = offsets_log(tmp_path, p, [
        (rec.offset_key(group, "t", 0), rec.offset_value(rec.OffsetValue(3, "", 0, -1)))])
    hosted = Hosted()
    hosted.partitions[tp] = led = Led(log_)
    catalog = GroupCatalog(hosted, lambda: PARTITIONS, 0, lambda g, o: None)
    catalog.refresh()
    gevent.sleep(0.2)
    assert catalog.status(group) == ErrorCode.NONE
    # Another broker led in between and wrote; we lead again in a later epoch.
    log_.append_as_leader(build_v2_batch([Record(
        rec.offset_key(group, "t", 0), rec.offset_value(rec.OffsetValue(8, "", 0, -1)))]), 3)
    led.leader_epoch = 3
    assert catalog.status(group) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    gevent.sleep(0.2)
    assert catalog.status(group) == ErrorCode.NONE
    assert catalog.offsets[group][("t", 0)].offset == 8


def test_an_undecodable_record_is_skipped_not_fatal(tmp_path):
    group = "orders"
    p = partition_for(group, PARTITIONS)
    tp, log_ = offsets_log(tmp_path, p, [
        (b"\x00\x07garbage", b"x"),
        (rec.offset_key(group, "t", 0), rec.offset_value(rec.OffsetValue(3, "", 0, -1)))])
    hosted = Hosted()
    hosted.partitions[tp] = Led(log_)
    catalog = GroupCatalog(hosted, lambda: PARTITIONS, 0, lambda g, o: None)
    catalog.refresh()
    gevent.sleep(0.2)
    assert catalog.status(group) == ErrorCode.NONE
    assert catalog.offsets[group][("t", 0)].offset == 3


def test_members_of_a_loaded_group_expire_when_their_sessions_run_out(tmp_path):
    """The loader stamped the members' last heartbeat with the wall clock, the coordinator's
    timer compares with the monotonic one: a loaded member that never came back (its
    consumer was gone when every broker restarted) never expired, and the group's next
    rebalance waited for it for good (a system test's consumers read nothing for 180 s)."""
    from kafka_ha.clock import monotonic_ms

    group = "resume"
    p = partition_for(group, PARTITIONS)
    tp, log_ = offsets_log(tmp_path, p, [(rec.group_key(group), rec.group_value(group_record(group, ["m1"])))])
    hosted = Hosted()
    catalog = GroupCatalog(hosted, lambda: PARTITIONS, 0, lambda g, o: None)
    hosted.partitions[tp] = Led(log_)
    catalog.status(group)
    gevent.sleep(0.2)
    loaded = catalog.group(group)
    assert set(loaded.members) == {"m1"}
    now = monotonic_ms()
    loaded.tick(now)
    assert set(loaded.members) == {"m1"}                  # its session (1,000 ms) started at the load
    loaded.tick(now + 1500)
    assert not loaded.members and loaded.state == GroupState.EMPTY
