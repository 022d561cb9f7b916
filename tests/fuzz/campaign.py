"""A fuzz campaign against a live cluster, and the invariants it is judged by.

``run_campaign(cluster, frames, seed)`` sends ``frames`` frames from
``FrameMaker`` over a few connections per broker (a connection the broker
closes is replaced), keeps a bounded set of stalled connections that sent half
a frame (slow clients), and meanwhile watches the brokers:

- every broker's resident memory, sampled from /proc (peak per broker);
- the loop stall: an ApiVersions probe to each broker every 200 ms on its own
  connection (``LoopProbe``, which the failover bench uses too); the slowest
  answer is the longest stall;
- whether every broker process is still alive.

Each connection carries one frame at a time, so a frame that makes the broker
close the connection does not take unread frames with it.  It returns a
``Report``; ``check_invariants`` says what is wrong with it.  The
caller runs an acks=all producer beside it and judges that history itself.
"""
from __future__ import annotations

import selectors
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.framing import decode_response, encode_request
from kafka_ha.tools.availability_probes import LoopProbe
from kafka_ha.tools.processes import HOST, pid_alive
from tests.fuzz.frames import FORGED_PREFIX, FrameMaker

CONNECTIONS_PER_BROKER = 32
PARK_S = 0.3           # a frame unanswered for this long is left behind with its connection
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
    parked: Counter = field(default_factory=Counter)         # frames left waiting, by kind and API
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
                "parked": dict(self.parked.most_common(12)),
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


def _describe(frame) -> str:
    api = ApiKey(frame.api_key).name if frame.api_key in ApiKey._value2member_map_ else frame.api_key
    return f"{frame.kind} {api} v{frame.api_version}" if frame.api_key is not None else frame.kind


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
    """One fuzzing connection with at most one frame in flight, so that every frame
    reaches the broker: one that makes it close the connection costs only itself."""

    def __init__(self, port: int, report: Report, selector: selectors.BaseSelector) -> None:
        self.port, self.report, self.selector = port, report, selector
        self.sock: socket.socket | None = None
        self.buffer = b""
        self.pending = None          # the frame in flight
        self.sent_at = 0.0

    @property
    def idle(self) -> bool:
        return self.pending is None

    def send(self, frame) -> None:
        if self.sock is None:
            try:
                self.sock = socket.create_connection((HOST, self.port), timeout=10)
            except OSError:       # a broker that no longer accepts: that is a finding
                self.report.outcomes["connect failed"] += 1
                return
            self.sock.setblocking(False)
            self.selector.register(self.sock, selectors.EVENT_READ, self)
            self.buffer = b""
        try:
            sent = self.sock.send(frame.data)
        except BlockingIOError:
            sent = 0
        except OSError:
            self._lost("send failed")
            return
        if sent < len(frame.data):
            # A large frame the broker does not take at once (the memory pool may
            # hold it): finish it blocking, within a bound.
            try:
                self.sock.setblocking(True)
                self.sock.settimeout(PARK_S)
                self.sock.sendall(frame.data[sent:])
                self.sock.setblocking(False)
            except OSError:
                self._lost("send failed")
                return
        if not frame.silent:
            self.pending, self.sent_at = frame, time.monotonic()

    def on_readable(self) -> None:
        try:
            chunk = self.sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._lost("closed by the broker")
            return
        self.buffer += chunk
        while len(self.buffer) >= 4:
            (size,) = struct.unpack_from(">i", self.buffer)
            if len(self.buffer) < 4 + size:
                return
            frame, self.buffer = self.buffer[4:4 + size], self.buffer[4 + size:]
            self._answered(frame)

    def _answered(self, data: bytes) -> None:
        request, self.pending = self.pending, None
        self.report.outcomes["answered"] += 1
        if request is None or request.correlation_id is None:
            return
        try:
            _, body = decode_response(request.api_key, request.api_version, data)
        except Exception:   # an answer to a request we mangled: not ours to judge
            return
        _collect_error_codes(body, self.report.error_codes)

    def park_if_stuck(self, now: float) -> None:
        if self.pending is not None and now - self.sent_at > PARK_S:
            # A long poll or an acks=all wait: legitimate, but not worth waiting for.
            self.report.parked[_describe(self.pending)] += 1
            self._lost("parked (left waiting)")

    def _lost(self, how: str) -> None:
        self.report.outcomes[how] += 1
        self.close()

    def close(self) -> None:
        if self.sock is not None:
            self.selector.unregister(self.sock)
            self.sock.close()
            self.sock = None
        self.pending, self.buffer = None, b""


def _watch_memory(cluster, report: Report, stop: threading.Event) -> None:
    while not stop.is_set():
        for i in cluster.broker_ids:
            pid = cluster.broker_pid(i)
            rss = _rss(pid) if pid else 0
            report.peak_rss[i] = max(report.peak_rss.get(i, 0), rss)
        stop.wait(PROBE_INTERVAL_S)


def _idle_connection(connections: list[_Connection], selector) -> _Connection:
    """A connection with no frame in flight, waiting for answers (or parking) until one is."""
    while True:
        for c in connections:
            if c.idle:
                return c
        for key, _ in selector.select(timeout=0.05):
            key.data.on_readable()
        now = time.monotonic()
        for c in connections:
            c.park_if_stuck(now)


def run_campaign(cluster, frames: int, seed: int, topics: list[str]) -> Report:
    epoch = int(cluster.zk.get("/controller_epoch")[0])
    controller = cluster.controller()
    maker = FrameMaker(seed, topics, epoch, controller)
    report, stop = Report(), threading.Event()
    watcher = threading.Thread(target=_watch_memory, args=(cluster, report, stop), daemon=True)
    watcher.start()
    probe = LoopProbe({i: cluster.port(i) for i in cluster.broker_ids}, PROBE_INTERVAL_S).__enter__()
    selector = selectors.DefaultSelector()
    connections = [_Connection(cluster.port(i), report, selector)
                   for i in cluster.broker_ids for _ in range(CONNECTIONS_PER_BROKER)]
    stalled: list[socket.socket] = []
    started = time.monotonic()
    try:
        for _ in range(frames):
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
                _idle_connection(connections, selector).send(frame)
            report.frames += 1
    finally:
        report.seconds = time.monotonic() - started
        for c in connections:
            c.close()
        selector.close()
        for sock in stalled:
            sock.close()
        stop.set()
        watcher.join(60)
        probe.__exit__(None, None, None)
        stalls = [b["max_ms"] for b in probe.summary().values()]
        report.longest_stall_s = max(stalls, default=0.0) / 1000
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
