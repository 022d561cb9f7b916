"""Which options the ``kafka_ha`` source and sink know, and ``kafka.*`` pass-through (pure).

Spark's Kafka connector hands every ``kafka.<key>`` option to the Kafka client as
``<key>``.  Our client is kafka-ha's own, so a ``kafka.<key>`` is accepted only for
the client settings it has (:data:`SOURCE_CLIENT_KEYS`, :data:`SINK_CLIENT_KEYS`);
any other name, ``kafka.*`` or not, is an error that lists the known ones, instead
of a setting silently ignored.  Option names are case-insensitive, as in Spark.

>>> check_known({"subscribe": "t", "kafka.request.timeout.ms": "500"}, "source")
>>> check_known({"topic": "t", "queryname": "q", "checkpointLocation": "/c"}, "sink")  # Spark's own
>>> check_known({"subscribe": "t", "startingOffset": "earliest"}, "source")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: unknown option 'startingOffset' for the kafka_ha source (known: ...)
>>> check_known({"topic": "t", "kafka.ssl.keystore.location": "/k"}, "sink")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: option 'kafka.ssl.keystore.location' is not supported: kafka-ha's client has no such setting (kafka.* options it takes: ...)
>>> client_option({"kafka.request.timeout.ms": "500"}, "request.timeout.ms")
'500'
"""
from __future__ import annotations

from typing import Mapping

from .options import _get

# Settings of kafka-ha's client, given as ``<key>`` or Spark's ``kafka.<key>``.
SOURCE_CLIENT_KEYS = ("bootstrap.servers", "request.timeout.ms", "max.partition.fetch.bytes",
                      "fetch.max.wait.ms", "fetch.min.bytes", "client.id", "group.id",
                      "security.protocol")
SINK_CLIENT_KEYS = ("bootstrap.servers", "acks", "compression.type", "linger.ms", "batch.size",
                    "max.block.ms", "delivery.timeout.ms", "client.id", "security.protocol")

SOURCE_OPTIONS = (
    "subscribe", "subscribePattern", "assign", "zookeeper.connect",
    "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy", "failOnDataLoss", "minPartitions",
    "maxRecordsPerPartition", "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    "includeHeaders", "groupIdPrefix", "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs", "highWatermarkGraceMs", "arrowBatchRows")
SINK_OPTIONS = ("topic", "zookeeper.connect", "compression", "includeHeaders")
# Spark itself puts these into a data source's options: ``path`` from load(path)/save(path),
# and DataStreamWriter keeps ``checkpointLocation`` and ``queryName`` among the options it
# hands the sink.
SPARK_OPTIONS = ("path", "checkpointLocation", "queryName")


def client_option(options: Mapping[str, str], key: str, default: str | None = None) -> str | None:
    """A client setting given as ``key`` or as Spark's ``kafka.<key>`` (the plain name wins)."""
    value = _get(options, key)
    if value is None:
        value = _get(options, "kafka." + key)
    return default if value is None else value


def check_known(options: Mapping[str, str], role: str) -> None:
    """Raise ValueError for an option that the ``role`` ("source" or "sink") does not know."""
    client = SOURCE_CLIENT_KEYS if role == "source" else SINK_CLIENT_KEYS
    own = SOURCE_OPTIONS if role == "source" else SINK_OPTIONS
    known = {n.lower() for n in own + client + SPARK_OPTIONS}
    known_kafka = {n.lower() for n in client}
    for name in options:
        lowered = name.lower()
        if lowered.startswith("kafka."):
            if lowered[len("kafka."):] not in known_kafka:
                raise ValueError(
                    f"option {name!r} is not supported: kafka-ha's client has no such setting "
                    f"(kafka.* options it takes: {', '.join('kafka.' + k for k in client)})")
        elif lowered not in known:
            raise ValueError(f"unknown option {name!r} for the kafka_ha {role} (known: "
                             f"{', '.join(own + client)}, and kafka.<setting> for the "
                             f"client settings)")
    protocol = client_option(options, "security.protocol")
    if protocol is not None and protocol.strip().upper() != "PLAINTEXT":
        raise ValueError(f"security.protocol {protocol!r} is not supported: kafka-ha brokers "
                         f"and clients speak PLAINTEXT only")
