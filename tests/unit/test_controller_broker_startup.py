"""A starting broker's metadata is sent before the controller writes the elections its start
makes possible (issue 23: a restarted broker answered UNKNOWN_TOPIC_OR_PARTITION meanwhile)."""

from kafka_ha.protocol.api import ApiKey
from tests.harness.controller_driver import new_cluster, states


def test_a_starting_broker_learns_the_topics_before_its_partitions_are_elected():
    # Broker 2 is the only replica of t-0: while it is down, t-0 is offline.
    zk, brokers, controller = new_cluster(topics={"t": {0: (2,), 1: (3,)}})
    brokers.kill(2)
    controller.run_pending()
    assert states(zk, "t", [0])[0].leader == -1
    leaders_stored_when_sent = []
    channel = controller.channel
    send = channel.send

    def recording_send(broker_id, api_key, version, body, callback=None):
        if broker_id == 2 and api_key == ApiKey.UPDATE_METADATA:
            leaders_stored_when_sent.append(states(zk, "t", [0])[0].leader)
        return send(broker_id, api_key, version, body, callback)
    channel.send = recording_send
    sent_before = len(channel.sent(ApiKey.UPDATE_METADATA, 2))

    brokers.start(2)
    controller.run_pending()

    # The first UpdateMetadata (every topic, so Metadata names t at once) left before the
    # election of t-0 was written; a later one carries the new leader.
    assert leaders_stored_when_sent[0] == -1
    assert states(zk, "t", [0])[0].leader == 2
    first = channel.sent(ApiKey.UPDATE_METADATA, 2)[sent_before].body
    assert {(s["topic"], s["partition"]) for s in first["partition_states"]} >= {("t", 0), ("t", 1)}
    assert controller.channel.leader_and_isr(2)


def test_the_broker_startup_line_says_where_the_time_went(caplog):
    """As the failure line does: a restart of a broker that is the last replica of 10,000
    partitions spent over a second in the controller, and nothing said where."""
    import re

    import gevent
    zk, brokers, controller = new_cluster(topics={"t": {0: (2,), 1: (3, 2), 2: (2, 3)}})
    brokers.kill(2)
    controller.run_pending()
    with caplog.at_level("INFO", logger="kafka_ha.controller"):
        brokers.start(2)
        controller.run_pending()
        gevent.sleep(0.01)             # the line comes once the LeaderAndIsr answers are in
    [line] = [r.getMessage() for r in caplog.records  # (a line of the test before may come too)
              if r.getMessage().startswith("Broker startup [2] handled: UpdateMetadata of 3")]
    assert re.fullmatch(r"Broker startup \[2\] handled: UpdateMetadata of 3 partitions sent in \d+ ms; "
                        r"3 replicas on it, 1 partitions brought online; 1 state znodes written in "
                        r"\d+ ms; LeaderAndIsr acknowledged \d+ ms after the event started", line), line
