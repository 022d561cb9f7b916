"""A fuzz campaign against a live cluster, and the invariants it is judged by.

``run_campaign(cluster, frames, seed)`` sends ``frames`` frames from
``FrameMaker`` over a few connections per broker (a connection the broker
closes is replaced), keeps a bounded set of stalled connections that sent half
a frame (slow clients), and meanwhile watches the brokers:

- every broker's resident memory, sampled from /proc (peak per broker);
- the loop stall: an ApiVersions probe to each broker every 200 ms on its own
  connection; the slowest answer is the longest stall;
- whether every broker process is still alive.

It returns a ``Report``; ``check_invariants`` says what is wrong with it.  The
caller runs an acks=all producer beside it and judges that history itself.
"""
from __future__ import annotations

import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.framing import decode_response, encode_request
from kafka_ha.tools.processes import HOST, pid_alive
from tests.fuzz.frames import FORGED_PREFIX, FrameMaker

CONNECTIONS_PER_BROKER = 4
MAX_STALLED = 32
PROBE_INTERVAL_S = 0.2
MEMORY_BOUND = 512 * 1024 * 1024
STALL_BOUND_S = 1.0


@dataclass
class Report:
    frames: int = 0
    seconds: float = 0.0
    kinds: Counter = field(default_factory=Counter)
    outcomes: Counter = field(default_factory=Counter)       # answered / closed / send failed
    error_codes: Counter = field(default_factory=Counter)    # every error_code in decoded answers
    peak_rss: dict = field(default_factory=dict)              # broker -> bytes
    longest_stall_s: float = 0.0
    dead: list = field(default_factory=list)

    @property
    def frames_per_second(self) -> float:
        return self.frames / self.seconds if self.seconds else 0.0

    def as_dict(self) -> dict:
        return {"frames": self.frames, "seconds": round(self.seconds, 1),
                "frames_per_second": round(self.frames_per_second),
                "kinds": dict(self.kinds), "outcomes": dict(self.outcomes),
                "error_codes": {str(k): v for k, v in sorted(self.error_codes.items())},
                "peak_rss_mb": {b: round(v / 2**20) for b, v in self.peak_rss.items()},
                "longest_stall_ms": round(self.longest_stall_s * 1000), "dead_brokers": self.dead}


def check_invariants(report: Report) -> list[str]:
    problems = []
    if report.dead:
        problems.append(f"brokers died: {report.dead}")
    for broker, rss in report.peak_rss.items():
        if rss > MEMORY_BOUND:
            problems.append(f"broker {broker} peaked at {rss / 2**20:.0f} MB")
    if report.longest_stall_s > STALL_BOUND_S:
        problems.append(f"a broker's loop stalled for {report.longest_stall_s:.2f} s")
    return problems


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _collect_error_codes(value, into: Counter) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "error_code":
                into[v] += 1
            else:
                _collect_error_codes(v, into)
    elif isinstance(value, list):
        for item in value:
            _collect_error_codes(item, into)


class _Connection:
    """One fuzzing connection: frames out, answers drained and decoded as they come."""

    def __init__(self, port: int, report: Report, lock: threading.Lock) -> None:
        self.port, self.report, self.lock = port, report, lock
        self.sock: socket.socket | None = None
        self.buffer = b""
        self.waiting: dict[int, tuple[int, int]] = {}

    def send(self, frame) -> None:
        if self.sock is None:
            self.sock = socket.create_connection((HOST, self.port), timeout=10)
            self.sock.setblocking(False)
            self.buffer, self.waiting = b"", {}
        if frame.correlation_id is not None:
            self.waiting[frame.correlation_id] = (frame.api_key, frame.api_version)
        try:
            self.sock.setblocking(True)
            self.sock.settimeout(10)
            self.sock.sendall(frame.data)
            self.sock.setblocking(False)
        except OSError:
            self._lost("send failed")
            return
        self.drain()

    def drain(self) -> None:
        while self.sock is not None:
            try:
                chunk = self.sock.recv(1 << 16)
            except BlockingIOError:
                break
            except OSError:
                self._lost("closed")
                return
            if not chunk:
                self._lost("closed")
                return
            self.buffer += chunk
            self._answers()

    def _answers(self) -> None:
        while len(self.buffer) >= 4:
            (size,) = struct.unpack_from(">i", self.buffer)
            if len(self.buffer) < 4 + size:
                return
            frame, self.buffer = self.buffer[4:4 + size], self.buffer[4 + size:]
            codes: Counter = Counter()
            (cid,) = struct.unpack_from(">i", frame)
            request = self.waiting.pop(cid, None)
            if request is not None:
                try:
                    _, body = decode_response(request[0], request[1], frame)
                    _collect_error_codes(body, codes)
                except Exception:   # an answer to a request we mangled: not ours to judge
                    pass
            with self.lock:
                self.report.outcomes["answered"] += 1
                self.report.error_codes.update(codes)

    def _lost(self, how: str) -> None:
        with self.lock:
            self.report.outcomes[how] += 1
        self.close()

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def _probe(port: int) -> float:
    started = time.monotonic()
    with socket.create_connection((HOST, port), timeout=30) as sock:
        sock.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, "probe", {}))
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("probe connection closed")
            data += chunk
    return time.monotonic() - started


def _watch(cluster, report: Report, stop: threading.Event, lock: threading.Lock) -> None:
    while not stop.is_set():
        for i in cluster.broker_ids:
            pid = cluster.broker_pid(i)
            rss = _rss(pid) if pid else 0
            try:
                stall = _probe(cluster.port(i))
            except OSError:
                stall = 30.0
            with lock:
                report.peak_rss[i] = max(report.peak_rss.get(i, 0), rss)
                report.longest_stall_s = max(report.longest_stall_s, stall)
        stop.wait(PROBE_INTERVAL_S)


def run_campaign(cluster, frames: int, seed: int, topics: list[str]) -> Report:
    epoch = int(cluster.zk.get("/controller_epoch")[0])
    controller = cluster.controller()
    maker = FrameMaker(seed, topics, epoch, controller)
    report, lock, stop = Report(), threading.Lock(), threading.Event()
    watcher = threading.Thread(target=_watch, args=(cluster, report, stop, lock), daemon=True)
    watcher.start()
    connections = [_Connection(cluster.port(i), report, lock)
                   for i in cluster.broker_ids for _ in range(CONNECTIONS_PER_BROKER)]
    stalled: list[socket.socket] = []
    started = time.monotonic()
    try:
        for n in range(frames):
            frame = maker.next()
            report.kinds[frame.kind] += 1
            if frame.kind == "size" and maker.rng.random() < 0.5:
                # a slow client: half a frame on a connection of its own, kept open
                port = cluster.port(maker.rng.choice(cluster.broker_ids))
                try:
                    sock = socket.create_connection((HOST, port), timeout=10)
                    sock.sendall(frame.data)
                    stalled.append(sock)
                except OSError:
                    report.outcomes["send failed"] += 1
                if len(stalled) > MAX_STALLED:
                    stalled.pop(0).close()
            else:
                connections[n % len(connections)].send(frame)
            report.frames += 1
    finally:
        report.seconds = time.monotonic() - started
        time.sleep(0.5)
        for c in connections:
            c.drain()
            c.close()
        for sock in stalled:
            sock.close()
        stop.set()
        watcher.join(60)
        report.dead = [i for i in cluster.broker_ids if not pid_alive(cluster.broker_pid(i))]
    return report


def forged_traces(cluster) -> list[str]:
    """Anything a forged controller request left behind: log dirs or metadata of forged-* topics."""
    traces = [str(p) for p in cluster.dir.glob(f"broker-*/**/{FORGED_PREFIX}*")]
    for i in cluster.broker_ids:
        with socket.create_connection((HOST, cluster.port(i)), timeout=30) as sock:
            sock.sendall(encode_request(ApiKey.METADATA, 1, 1, "check", {"topics": None}))
            data = b""
            while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
                data += sock.recv(1 << 16)
        _, body = decode_response(ApiKey.METADATA, 1, data[4:])
        traces += [f"broker {i} lists topic {t['name']}" for t in body["topics"]
                   if t["name"].startswith(FORGED_PREFIX)]
        if body["controller_id"] == 4242 or any(b["node_id"] == 4242 for b in body["brokers"]):
            traces.append(f"broker {i} names the fake broker 4242")
    return traces
