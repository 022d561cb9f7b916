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
