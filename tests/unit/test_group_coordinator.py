"""The coordinator's handlers over a real catalog, with the broker's append path faked."""
import gevent

from kafka_ha.coordinator.catalog import GroupCatalog
from kafka_ha.coordinator.coordinator import GroupCoordinator
from kafka_ha.coordinator.placement import OFFSETS_TOPIC, partition_for
from kafka_ha.log.config import LogConfig
from kafka_ha.log.log import Log
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode
from tests.unit.test_group_catalog import Hosted, Led

CONFIG = {"group.min.session.timeout.ms": 1000, "group.max.session.timeout.ms": 60000,
          "offsets.commit.timeout.ms": 1000}
GROUP = "g"


def coordinator(tmp_path, append_error):
    p = partition_for(GROUP, 4)
    tp = TopicPartition(OFFSETS_TOPIC, p)
    hosted = Hosted()
    hosted.partitions[tp] = Led(Log(str(tmp_path / "log"), tp, LogConfig()))
    appended = []

    def append(tp_, batch, timeout_s):
        appended.append(tp_)
        return append_error
    catalog = GroupCatalog(hosted, lambda: 4, 0, lambda g, o: None, append)
    catalog.refresh()
    gevent.sleep(0.1)
    return GroupCoordinator(CONFIG, catalog, lambda partition: (ErrorCode.NONE, None)), appended


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
