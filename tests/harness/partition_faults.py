"""One partition under faults: the kit of the fault tests that produce with acks=all, pause
or cut brokers, and check that every acknowledged value survives.

TOPIC has one partition with min.insync.replicas=2; values are unique, so a value read
back says where it was written.  A zombie leader (one replaced while it was stopped or cut
off) is handed produce requests that it must refuse when it resumes.
"""

import socket
import time

from kafka_ha.client.producer import Producer
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.protocol.framing import decode_response, encode_request
from kafka_ha.protocol.stream_io import FrameReader, TruncatedFrame
from kafka_ha.records.builder import Record, build_v2_batch
from kafka_ha.tools.processes import HOST
from tests.harness.kafka import (create_topic, log_text, read_state, received_leader_and_isr,
                                 verify_replicas, wait_isr)
from tests.harness.load import read_all
from tests.harness.replica_files import segment_bytes

TOPIC = "faults"


# ---- producing and checking -------------------------------------------------------------

def create_partition(cluster, replicas):
    """TOPIC with one partition on ``replicas`` (the first leads), min.insync.replicas=2."""
    create_topic(cluster, TOPIC, 1, len(replicas), "--replica-assignment", ":".join(map(str, replicas)),
                 "--config", "min.insync.replicas=2")
    wait_isr(cluster, TOPIC, replicas)
    return read_state(cluster, TOPIC, 0)


def acked_offsets(bootstrap, values, **producer_config):
    """Produce ``values`` with acks=all and wait for every answer: {value: acknowledged offset}."""
    producer = Producer(bootstrap, acks="all", retries=20, **producer_config)
    try:
        futures = {v: producer.send(TOPIC, v, partition=0) for v in values}
        producer.flush()
        return {v: f.get(timeout=60).offset for v, f in futures.items()}
    finally:
        producer.close()


def assert_acked_readable(cluster, acked):
    """Every acknowledged value is where it was acknowledged; returns what consumers read."""
    readable = dict(read_all(cluster, TOPIC))
    lost = {v: o for v, o in acked.items() if readable.get(o) != v}
    assert not lost, f"{len(lost)} acknowledged values not at their offsets, e.g. {list(lost.items())[:5]}"
    return readable


def assert_zombie_left_no_trace(cluster, acked, refused):
    """After a zombie leader rejoined as follower: every acknowledged value is where it was
    acknowledged, none it refused is readable or left in any replica's log (it truncated),
    and the replicas are identical."""
    readable = assert_acked_readable(cluster, acked)
    assert not set(refused) & set(readable.values()), "a value the zombie refused is readable"
    for b in cluster.broker_ids:
        kept = [v for v in refused if v in segment_bytes(cluster, b, TOPIC)]
        assert not kept, f"broker {b}'s log still holds {kept}: the zombie did not truncate"
    verify_replicas(cluster, TOPIC)


def unique_values(prefix, count):
    return [b"%s-%d" % (prefix, i) for i in range(count)]


# ---- a zombie leader (scenario #4) --------------------------------------------------------

# What a replaced leader may answer an acks=-1 produce: anything but success.
CLOSED = "connection closed"
ZOMBIE_REFUSALS = {ErrorCode.NOT_LEADER_FOR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                   ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT, CLOSED}
ZOMBIE_PRODUCE_TIMEOUT_MS = 15000
REQUESTS_PER_CONNECTION = 2


def queue_produces(port, refused):
    """Write one acks=-1 Produce per value of ``refused`` to ``port`` of a stopped broker.

    The kernel completes the connections and buffers the requests for the stopped
    process, so they are the first thing it reads when it resumes, while it may still
    believe it leads.  Several connections, each with requests pipelined behind each
    other, so that more than one of them is handled before the broker learns otherwise.
    Returns [(socket, the values sent on it)].
    """
    queued = []
    for first in range(0, len(refused), REQUESTS_PER_CONNECTION):
        batch = refused[first:first + REQUESTS_PER_CONNECTION]
        sock = socket.create_connection((HOST, port), timeout=60)
        for correlation_id, value in enumerate(batch):
            sock.sendall(encode_request(ApiKey.PRODUCE, 2, correlation_id, "zombie-test", {
                "acks": -1, "timeout_ms": ZOMBIE_PRODUCE_TIMEOUT_MS, "topic_data": [
                    {"name": TOPIC, "partition_data": [
                        {"index": 0, "records": build_v2_batch([Record(None, value)])}]}]}))
        queued.append((sock, batch))
    return queued


def read_produce_answers(sock, count):
    """The partition error codes of the next ``count`` Produce v2 answers on ``sock``.

    A connection the broker closes instead counts as CLOSED for every unanswered request.
    """
    reader = FrameReader(0, 1 << 20)
    answers = []
    with sock:
        for _ in range(count):
            try:
                frame = reader.read(sock.recv_into)
            except (TruncatedFrame, ConnectionResetError):
                frame = None
            except socket.timeout:
                return answers + ["no answer within 60 s"] * (count - len(answers))
            if frame is None:
                return answers + [CLOSED] * (count - len(answers))
            _, body = decode_response(ApiKey.PRODUCE, 2, frame)
            answers.append(body["responses"][0]["partition_responses"][0]["error_code"])
    return answers


def wait_leader_and_isr_received(cluster, brokers, topic_epoch, since=None):
    """Wait until every broker of ``brokers`` applied a LeaderAndIsr of TOPIC-0 at ``topic_epoch``
    or later (``since``: {broker: state-change.log offset} to read from)."""
    def received(b):
        text = log_text(cluster, b, "state-change.log", (since or {}).get(b, 0))
        return received_leader_and_isr(text).get((TOPIC, 0), -1) >= topic_epoch
    cluster.wait_until(lambda: all(received(b) for b in brokers), timeout=60,
                       message=f"brokers {brokers} did not all get leader epoch {topic_epoch}")


# ---- a follower that stops fetching --------------------------------------------------------

def stop_fetching(cluster, broker, stopped):
    """SIGSTOP ``broker`` and add it to ``stopped`` (which the test resumes in its
    ``finally``); returns once the fetch it had pending has come back empty."""
    cluster.sigstop(broker)
    stopped.append(broker)
    # Let its pending long-poll fetch (max wait 500 ms) come back empty, or the leader
    # would answer it with the next record into the stopped broker's socket buffer.
    time.sleep(1.0)


def resume(cluster, broker, stopped):
    cluster.sigcont(broker)
    stopped.remove(broker)
