"""The confluent probe's reading of librdkafka's debug log (tools/availability_probes.py)."""
import logging

from kafka_ha.tools.availability_probes import LeaderLearned


def record(message: str) -> logging.LogRecord:
    # confluent-kafka hands librdkafka's lines to the logger as "%s [%s] %s" arguments
    return logging.LogRecord("p", logging.DEBUG, __file__, 1, "%s [%s] %s",
                             ("TOPICUPD", "rdkafka#producer-1", message), None)


def test_only_a_live_new_leader_of_the_topic_after_go_counts():
    learned = LeaderLearned("failover")
    learned.emit(record("Topic failover [4]: migrating from broker -1 to 2 (leader is 2): "
                        "leader updated"))                  # before go: not the failover
    learned.since = 0.0
    learned.emit(record("Topic failover [5]: migrating from broker 3 to -1 (leader is -1): "
                        "leader lost"))                     # lost, not learned
    learned.emit(record("Topic other [6]: migrating from broker 3 to 1 (leader is 1): x"))
    learned.emit(record("Topic failover [7]: migrating from broker 3 to 1 (leader is 1): "
                        "leader updated"))
    assert list(learned.at) == [7]
