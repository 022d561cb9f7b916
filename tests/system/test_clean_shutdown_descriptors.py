"""A clean shutdown of a broker with many logs stays within its open-file limit.

Closing the logs fsyncs each log's directory and the data directory.  With gevent
25.8 and later, ``os.close`` of anything but a regular file waited for the event
loop's next turn, which a shutdown closing every log in one pass never gave: the
directories' descriptors piled up, the broker hit EMFILE and halted before writing
its clean-shutdown marker (10,000 logs against a limit of 20,000, in the restart
bench).  Here the broker runs with a limit of 700 descriptors and stops with 600
logs it created and never flushed: each has its directory and the data directory
to fsync (and one written, its segment file to keep open).
"""
import resource

import pytest

from kafka_ha.client.producer import Producer
from kafka_ha.log.log_manager import CLEAN_SHUTDOWN_MARKER
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.connection import BrokerConnection
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.tools.processes import HOST
from tests.harness.cluster import wait_until
from tests.harness.kafka import create_topic, log_text

pytestmark = pytest.mark.system
PARTITIONS = 600
OPEN_FILES = 700


def leads_every_partition(cluster):
    """Whether ListOffsets of every partition succeeds at broker 1 (it leads them all)."""
    with BrokerConnection(HOST, cluster.port(1), "descriptor-test", 10.0) as conn:
        answer = conn.request(ApiKey.LIST_OFFSETS, 1, {"replica_id": -1, "topics": [
            {"name": "many", "partitions": [{"partition_index": p, "timestamp": -1}
                                            for p in range(PARTITIONS)]}]})
    return all(p["error_code"] == ErrorCode.NONE for t in answer["topics"] for p in t["partitions"])


def test_a_broker_with_many_logs_shuts_down_cleanly_within_its_open_file_limit(cluster_factory):
    cluster = cluster_factory(1)
    # Set on the running broker: at start-up it raises its soft limit to the hard one.
    resource.prlimit(cluster.broker_pid(1), resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))
    create_topic(cluster, "many", PARTITIONS, 1)
    producer = Producer(cluster.bootstrap_servers, acks=-1, retries=20)
    try:
        producer.send("many", b"v", partition=0).get(timeout=60)
    finally:
        producer.close()
    wait_until(lambda: leads_every_partition(cluster), 60,
               message="the broker does not lead every partition")

    cluster.cluster.stop_broker(1, 60.0)

    text = log_text(cluster, 1, "server.log")
    assert "Halting" not in text and "Too many open files" not in text
    assert (cluster.data_dir(1) / CLEAN_SHUTDOWN_MARKER).exists()
