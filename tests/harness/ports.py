"""Pick free TCP ports on 127.0.0.1 for servers started by tests.

Ports are drawn at random from below the kernel's ephemeral range, so that a port handed
to a broker cannot be taken meanwhile as the local port of some outgoing connection (the
broker must be able to bind it again after a restart), and so that concurrent test runs on
one machine are unlikely to collide.  Within one process no port is handed out twice.
"""

import os
import random

from kafka_ha.tools.processes import port_free

_handed_out = set()


def _candidate_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    high = min(low, 32768) - 200
    low, high = (10000, high) if high > 11000 else (40000, 60000)
    return _worker_slice(low, high, os.environ.get("PYTEST_XDIST_WORKER"),
                         os.environ.get("PYTEST_XDIST_WORKER_COUNT"))


def _worker_slice(low, high, worker, count):
    """The part of [low, high) that a pytest-xdist worker draws from: workers are separate
    processes, so ``_handed_out`` cannot keep one from taking a port another has just
    checked and is about to bind; disjoint slices can.

    >>> _worker_slice(10000, 30000, "gw1", "2"), _worker_slice(10000, 30000, None, None)
    ((20000, 30000), (10000, 30000))
    """
    if not worker or not count or not worker.startswith("gw"):
        return low, high
    index, count = int(worker[2:]), max(1, int(count))
    size = (high - low) // count
    return low + index * size, low + (index + 1) * size


def free_port_block(offsets, attempts=500):
    """A base port P such that P + o is free for every offset ``o`` (all reserved).

    >>> base = free_port_block([0, 1, 100])
    >>> base + 100 > base + 1 > base >= 10000
    True
    """
    low, high = _candidate_range()
    span = max(offsets)
    for _ in range(attempts):
        base = random.randrange(low, high - span)
        ports = [base + o for o in offsets]
        if not _handed_out.intersection(ports) and all(port_free(p) for p in ports):
            _handed_out.update(ports)
            return base
    raise RuntimeError(f"no free port block for offsets {offsets} in {low}-{high}")


def free_ports(count):
    """``count`` distinct free ports (not necessarily contiguous)."""
    return [free_port_block([0]) for _ in range(count)]
