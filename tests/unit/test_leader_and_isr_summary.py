"""Each LeaderAndIsr ends with one summary line in the state-change log: how many
partitions took which transition and how long the request held the broker, the
figure an operator compares with the controller's wait for the answer."""
from __future__ import annotations

import logging
import re
from pathlib import Path

from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.config import BrokerConfig
from kafka_ha.log.config import LogConfig
from kafka_ha.log.log_manager import LogManager
from kafka_ha.model import PartitionStateInfo, TopicPartition
from kafka_ha.protocol.partition_states import to_wire
from kafka_ha.state_change_log import LOGGER_NAME

ME = 1


def request(*states: PartitionStateInfo) -> dict:
    return {"controller_id": 2, "controller_epoch": 3, "partition_states": [to_wire(s) for s in states],
            "live_leaders": []}


def test_a_leader_and_isr_ends_with_its_summary_line(tmp_path: Path, caplog):
    config = BrokerConfig({"broker.id": ME, "zookeeper.connect": "127.0.0.1:2181"})
    manager = ReplicaManager(config, LogManager([str(tmp_path)], LogConfig()), None, lambda t: 1,
                             lambda t: LogConfig(), lambda b: None)
    led = [PartitionStateInfo(TopicPartition("t", p), 3, ME, 1, (ME, 2), 0, (ME, 2)) for p in range(2)]
    followed = PartitionStateInfo(TopicPartition("t", 2), 3, 2, 1, (2, ME), 0, (2, ME))
    with caplog.at_level(logging.INFO, logger=LOGGER_NAME):
        manager.leader_and_isr(request(*led, followed), 7)
        manager.leader_and_isr(request(led[0]), 8)          # the same epoch again: ignored
    summaries = [m for r in caplog.records if r.name == LOGGER_NAME
                 for m in r.getMessage().split("\n") if " handled LeaderAndIsr" in m]
    assert len(summaries) == 2, summaries
    assert re.fullmatch(r"Broker 1 handled LeaderAndIsr request correlation id 7 from controller 2 "
                        r"epoch 3: 3 partitions \(2 become-leader, 1 become-follower, 0 refused\) "
                        r"in \d+ ms", summaries[0]), summaries[0]
    assert re.fullmatch(r"Broker 1 handled LeaderAndIsr request correlation id 8 from controller 2 "
                        r"epoch 3: 1 partitions \(0 become-leader, 0 become-follower, 1 refused\) "
                        r"in \d+ ms", summaries[1]), summaries[1]


def test_the_logs_a_leader_and_isr_creates_are_announced_in_one_record(tmp_path: Path, caplog):
    # One record per created log cost a third of applying a LeaderAndIsr for 10k new
    # partitions (each record: a rollover check, a format, a flush).  One line each still.
    config = BrokerConfig({"broker.id": ME, "zookeeper.connect": "127.0.0.1:2181"})
    manager = ReplicaManager(config, LogManager([str(tmp_path)], LogConfig()), None, lambda t: 1,
                             lambda t: LogConfig(), lambda b: None)
    states = [PartitionStateInfo(TopicPartition("t", p), 3, ME, 1, (ME, 2), 0, (ME, 2)) for p in range(3)]
    with caplog.at_level(logging.INFO, logger="kafka_ha.log.log_manager"):
        manager.leader_and_isr(request(*states), 7)
    records = [r for r in caplog.records if r.getMessage().startswith("created log for")]
    assert len(records) == 1
    assert records[0].getMessage().split("\n") == [f"created log for [t,{p}] in {tmp_path}" for p in range(3)]
