"""The broker's data path in two layers, as in Kafka: the request layer (KafkaApis) and the
replica side (the replica manager's partitions), kept apart in the import graph.

The request layer turns requests into calls and results into responses; it reaches
partitions only through the replica side's operations.  The replica side takes and
returns model values: it knows neither the request layer nor the wire's layouts.
"""
from __future__ import annotations

import grimp
import pytest

REQUEST_LAYER = {"kafka_ha.broker.kafka_apis", "kafka_ha.broker.data_apis",
                 "kafka_ha.broker.fetch_sessions"}
REPLICA_SIDE = {"kafka_ha.broker.hosted_partitions", "kafka_ha.broker.replica_appends",
                "kafka_ha.broker.replica_reads", "kafka_ha.broker.replica_offsets"}
# What the replica side may use of kafka_ha.protocol: the error codes every layer
# shares, and the sendfile regions a read hands out.  Not schemas, framing or API keys.
PROTOCOL_FOR_THE_REPLICA_SIDE = {"kafka_ha.protocol.errors", "kafka_ha.protocol.file_region"}
PARTITION_INTERNALS = {"kafka_ha.broker.partition", "kafka_ha.broker.replication"}


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("kafka_ha", cache_dir=None)


def test_the_layers_modules_exist(graph):
    assert REQUEST_LAYER | REPLICA_SIDE <= graph.modules


def test_the_data_apis_reach_partitions_only_through_the_replica_side(graph):
    imported = graph.find_modules_directly_imported_by("kafka_ha.broker.data_apis")
    assert not imported & PARTITION_INTERNALS
    assert not {m for m in imported if m.startswith("kafka_ha.log")}
    assert "kafka_ha.broker.replica_manager" not in imported


@pytest.mark.parametrize("module", sorted(REPLICA_SIDE))
def test_the_replica_side_knows_no_request_layer(graph, module):
    reached = {m for m in REQUEST_LAYER if graph.chain_exists(importer=module, imported=m)}
    assert reached == set()


@pytest.mark.parametrize("module", sorted(REPLICA_SIDE))
def test_the_replica_side_knows_no_wire_layout(graph, module):
    protocol = {m for m in graph.find_modules_directly_imported_by(module)
                if m.startswith("kafka_ha.protocol")}
    assert protocol <= PROTOCOL_FOR_THE_REPLICA_SIDE
