"""Issue 23 (loop stalls in a failover at 10k partitions): a long protocol array is
decoded and encoded in chunks, yielding to the broker's event loop in between.

Decoding a LeaderAndIsr of 10,000 partitions held the loop for 0.2 s on a quiet
machine (more on a loaded one), and no request was answered meanwhile; the
in-process LeaderAndIsr bench never saw it, since it hands the broker a decoded
request."""
from __future__ import annotations

import threading

import gevent
import pytest

from kafka_ha import cooperative
from kafka_ha.model import PartitionStateInfo, TopicPartition
from kafka_ha.protocol import primitives
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.framing import decode_request, decode_request_body, encode_request
from kafka_ha.protocol.partition_states import to_wire

N = 5 * primitives.ARRAY_CHUNK + 7


@pytest.fixture
def yielding_arrays():
    primitives.pause_long_arrays(cooperative.yield_on_this_thread())
    yield
    primitives.pause_long_arrays(None)


def leader_and_isr_frame(n: int = N) -> bytes:
    states = [to_wire(PartitionStateInfo(TopicPartition("t", p), 1, 3, 1, (3, 1), 5, (1, 2, 3)))
              for p in range(n)]
    body = {"controller_id": 1, "controller_epoch": 1, "partition_states": states,
            "live_leaders": [{"id": 3, "host": "127.0.0.1", "port": 9092}]}
    return encode_request(ApiKey.LEADER_AND_ISR, 0, 5, "controller", body)


def decode(frame: bytes) -> dict:
    header, reader = decode_request(memoryview(frame)[4:])
    return decode_request_body(header, reader)


def test_a_long_array_is_decoded_in_chunks_and_others_run_in_between(yielding_arrays):
    frame = leader_and_isr_frame()
    ticks = []
    ticker = gevent.spawn(lambda: [ticks.append(gevent.sleep(0)) for _ in range(100)])
    gevent.sleep(0)                       # the ticker is waiting for its turn
    body = decode(frame)
    during = len(ticks)
    ticker.kill()
    assert len(body["partition_states"]) == N
    assert during >= N // primitives.ARRAY_CHUNK, "other greenlets ran between the chunks"


def test_chunks_change_nothing_in_what_is_read_or_written(yielding_arrays):
    chunked_frame = leader_and_isr_frame()
    chunked = decode(chunked_frame)
    primitives.pause_long_arrays(None)
    assert leader_and_isr_frame() == chunked_frame
    assert decode(chunked_frame) == chunked
    assert [s["partition"] for s in chunked["partition_states"]] == list(range(N))


def test_without_the_hook_nothing_yields():
    frame = leader_and_isr_frame()
    ticks = []
    ticker = gevent.spawn(lambda: [ticks.append(gevent.sleep(0)) for _ in range(100)])
    gevent.sleep(0)
    decode(frame)
    during = len(ticks)
    ticker.kill()
    assert during == 0


def test_a_native_thread_never_yields_to_the_loop(yielding_arrays, monkeypatch):
    """Only the thread that installed the hook (the broker's event loop) yields: code
    run in a native thread has no loop of its own to yield to."""
    frame = leader_and_isr_frame()
    yields = []
    monkeypatch.setattr(cooperative, "yield_to_io", lambda: yields.append(threading.current_thread()))
    decoded = []
    worker = threading.Thread(target=lambda: decoded.append(decode(frame)))
    worker.start()
    worker.join(30)
    assert len(decoded[0]["partition_states"]) == N and yields == []
    decode(frame)
    assert len(yields) == N // primitives.ARRAY_CHUNK
