"""The plain-socket baselines the data bench measures beside the brokers, in the same run.

- :func:`socket_baseline`: what one loopback TCP connection between two Python
  processes moves (a plain copy, 1 MiB at a time): the floor under every MB/s figure;
- :func:`relay_floor`: a 1 KiB message relayed through the hops an acks=all write and its
  consumer take (client -> "leader" -> "follower" -> "leader" -> client) by plain
  blocking-socket processes: what the machine itself costs an end-to-end latency;
- :func:`fetch_serving`: log data sent as fetch responses do, copied (pread + sendall)
  or by sendfile (``FileRegions``), with the sender's CPU per GiB.
"""
from __future__ import annotations

import multiprocessing
import os
import socket
import time
from pathlib import Path

from kafka_ha.log.segment import FileSlice
from kafka_ha.protocol.file_region import FileRegions

RELAY_MESSAGE = 1024   # bytes the latency baseline relays, the e2e tool's message size


def _accept_one(port_queue) -> socket.socket:
    """Listen on a free loopback port, publish it on ``port_queue``, take one connection."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port_queue.put(server.getsockname()[1])
    conn, _ = server.accept()
    server.close()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def _sink(port_queue, total: int) -> None:
    conn = _accept_one(port_queue)
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    got = 0
    while got < total:
        n = conn.recv_into(view)
        if not n:
            break
        got += n
    conn.sendall(b"k")
    conn.close()


def _through_loopback(megabytes: int, send_mib) -> tuple[float, float]:
    """Push ``megabytes`` MiB to a sink process, ``send_mib(sock, i)`` sending the i-th MiB.

    Returns (MB/s, CPU seconds the sending process spent per GiB).
    """
    total = megabytes << 20
    ports: multiprocessing.Queue = multiprocessing.Queue()
    sink = multiprocessing.Process(target=_sink, args=(ports, total))
    sink.start()
    s = socket.create_connection(("127.0.0.1", ports.get(timeout=10)))
    cpu, started = time.process_time(), time.monotonic()
    for i in range(megabytes):
        send_mib(s, i)
    s.recv(1)
    elapsed, cpu = time.monotonic() - started, time.process_time() - cpu
    s.close()
    sink.join()
    return megabytes / elapsed, cpu * 1024 / megabytes


def _relay_follower(port_queue) -> None:
    conn = _accept_one(port_queue)
    while (message := _recv_exactly(conn, RELAY_MESSAGE)) is not None:
        conn.sendall(message[:8])             # a fetch carrying the new offset


def _relay_leader(port_queue, follower_port: int) -> None:
    follower = socket.create_connection(("127.0.0.1", follower_port))
    follower.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn = _accept_one(port_queue)
    while (message := _recv_exactly(conn, RELAY_MESSAGE)) is not None:
        follower.sendall(message)             # the follower's fetch response
        _recv_exactly(follower, 8)            # its next fetch: the message is committed
        conn.sendall(message)                 # the ack and the consumer's record, in one


def _recv_exactly(sock: socket.socket, n: int) -> bytearray | None:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            return None
        got += k
    return buf


def relay_floor(messages: int) -> dict:
    """Latency of a 1 KiB message through the hops of an acks=all produce and
    consume, relayed by plain blocking-socket processes (no broker work at all)."""
    ports: multiprocessing.Queue = multiprocessing.Queue()
    follower = multiprocessing.Process(target=_relay_follower, args=(ports,), daemon=True)
    follower.start()
    leader = multiprocessing.Process(target=_relay_leader, args=(ports, ports.get(timeout=10)),
                                     daemon=True)
    leader.start()
    client = socket.create_connection(("127.0.0.1", ports.get(timeout=10)))
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    message, latencies = os.urandom(RELAY_MESSAGE), []
    for _ in range(messages):
        begin = time.perf_counter_ns()
        client.sendall(message)
        echoed = _recv_exactly(client, RELAY_MESSAGE)
        latencies.append(time.perf_counter_ns() - begin)
        if echoed != message:
            raise RuntimeError("the relay returned something other than the message it was sent")
    client.close()
    leader.join(timeout=10)
    follower.join(timeout=10)
    ms = sorted(ns / 1e6 for ns in latencies)
    return {"messages": len(ms), "avg": sum(ms) / messages, "p50": ms[messages // 2],
            "p99": ms[int(messages * 0.99)], "p999": ms[int(messages * 0.999)]}


def socket_baseline(megabytes: int = 512) -> float:
    """MB/s of one loopback TCP connection between two Python processes."""
    chunk = b"\0" * (1 << 20)
    return _through_loopback(megabytes, lambda s, i: s.sendall(chunk))[0]


def fetch_serving(work: Path, megabytes: int = 256) -> list[tuple[int, str, float, float]]:
    """Sending log data as fetch responses do, copied (pread + sendall) or by sendfile.

    Reads come from a file in the page cache in responses of 16 KiB to 1 MiB:
    ``(response bytes, method, MB/s, sender CPU s/GiB)`` rows.
    """
    path, file_mib = work / "fetch-serving.log", 64
    with open(path, "wb") as f:
        for _ in range(file_mib):
            f.write(os.urandom(1 << 20))
    fd = os.open(path, os.O_RDONLY)
    rows = []
    try:
        for size in (16 << 10, 64 << 10, 1 << 20):
            def positions(i: int, size: int = size):
                """Where the responses of the i-th MiB sent start, wrapping round the file."""
                per_mib = (1 << 20) // size
                return (((i * per_mib + j) * size) % (file_mib << 20) for j in range(per_mib))

            def copied(s, i, size=size):
                for position in positions(i):
                    s.sendall(os.pread(fd, size, position))

            def sendfile(s, i, size=size):
                for position in positions(i):
                    regions = FileRegions.pin([FileSlice(fd, str(path), position, size, 0)])
                    regions.send_to(s)
                    regions.close()

            for name, method in (("pread + sendall", copied), ("sendfile (FileRegions)", sendfile)):
                rows.append((size, name, *_through_loopback(megabytes, method)))
    finally:
        os.close(fd)
        path.unlink()
    return rows
