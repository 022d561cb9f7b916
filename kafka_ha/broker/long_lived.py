"""Keeping what a broker holds for its lifetime out of the garbage collector's way.

CPython's cycle collector walks every object of the generations it collects, and
a full collection walks them all.  A broker's partitions, logs, segments and
indexes (some twenty objects per partition: hundreds of thousands at 10,000
partitions) live as long as the broker, yet each full collection walked them
again.  Applying a LeaderAndIsr makes many objects, so collections ran inside it:
after a restart, the first LeaderAndIsr for 10,000 loaded logs took 1.2-1.4 s, and
0.6-1.0 s with them frozen; in a failover, the survivors' LeaderAndIsr was
acknowledged 0.4-0.6 s later than with the partitions frozen.

:func:`freeze` (``gc.freeze``) moves every object tracked now into a permanent
generation that collections skip.  The broker calls it after loading its logs at
start-up and after a LeaderAndIsr that created at least ``FREEZE_AFTER_CREATED``
partitions: the moments when most of what is tracked is what it keeps.  The cost:
reference counting still frees frozen objects, but a reference cycle among them
that later becomes garbage (a deleted partition's, say) is never collected.  That
is bounded by what existed at those moments, and each such moment is rare (a
start-up, a topic of thousands of partitions created or moved here).

:func:`tune_collector` raises the collector's thresholds (``COLLECTOR_THRESHOLDS``) for
what freezing cannot reach: the objects of requests in flight.  With CPython's defaults
(700, 10, 10) a young collection runs every 700 net allocations, so a failover's burst
of requests, whose objects live across a few switches of the loop, was promoted to the
old generation faster than it died, and a full collection followed every second or so.
At 10,000 partitions a survivor spent 1.4-2.0 s of the 20 s after a kill -9 collecting,
most of it in five or six full collections of 150-500 ms each, on the loop.  With
50,000 allocations between young collections most of those objects are gone before the
first one: in the same runs no full collection ran at all.  The young generation is
bigger, so each young collection takes longer (tens of milliseconds); cycles are found
as before, only later.
"""
from __future__ import annotations

import gc

FREEZE_AFTER_CREATED = 1000
# (young, middle, old): allocations less frees between young collections, young
# collections per middle one, middle ones per full one (which CPython also holds back
# until the old generation has grown by a quarter).
COLLECTOR_THRESHOLDS = (50_000, 20, 20)


def freeze() -> None:
    """Move every object the collector tracks now out of its generations (see module doc)."""
    gc.freeze()


def tune_collector() -> None:
    """Set the broker's collector thresholds (see module doc); once, at start-up."""
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
