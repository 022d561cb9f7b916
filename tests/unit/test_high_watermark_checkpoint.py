"""The broker's periodic high-watermark checkpoint (replication-offset-checkpoint).

At 10,000 partitions sorting, rendering and fsyncing the file held the event loop for
0.1-0.27 s every 5 s, on an idle broker too: it is written in a native thread, and not
at all while no high watermark moved since the last write.
"""
from kafka_ha.broker import replica_log_tasks as rm_module
from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.config import BrokerConfig
from kafka_ha.log import LogConfig, LogManager
from kafka_ha.log.checkpoints import OffsetCheckpointFile
from kafka_ha.model import PartitionStateInfo, TopicPartition
from kafka_ha.records import Record, build_v2_batch
from tests.harness.leader_setup import NoIsrChanges

TP = TopicPartition("t", 0)


def test_the_checkpoint_is_written_off_the_loop_and_only_when_a_high_watermark_moved(tmp_path, monkeypatch):
    manager = LogManager([str(tmp_path / "logs")], LogConfig())
    rm = ReplicaManager(BrokerConfig({"broker.id": 1, "zookeeper.connect": "127.0.0.1:1"}), manager,
                        NoIsrChanges(), lambda topic: 1, lambda topic: LogConfig(), lambda b: None)
    leader = rm._create_partition(TP)
    leader.make_leader(PartitionStateInfo(TP, 1, 1, 0, (1, 2), 0, (1, 2)))
    in_threads = []

    def in_a_thread(fn, *args):
        in_threads.append(fn.__name__)
        return fn(*args)
    monkeypatch.setattr(rm_module, "in_a_thread", in_a_thread)
    path = tmp_path / "logs" / "replication-offset-checkpoint"
    rm.checkpoint_high_watermarks()
    assert in_threads == ["checkpoint_high_watermarks"] and OffsetCheckpointFile(str(path)).read() == {TP: 0}
    rm.checkpoint_high_watermarks()                       # nothing moved: no write
    assert len(in_threads) == 1
    leader.append_as_leader(build_v2_batch([Record(None, b"v")]), acks=1)
    leader.on_follower_fetch(2, 1, now=0)                 # the HW moves to 1
    rm.checkpoint_high_watermarks()
    assert len(in_threads) == 2 and OffsetCheckpointFile(str(path)).read() == {TP: 1}
    manager.close()
