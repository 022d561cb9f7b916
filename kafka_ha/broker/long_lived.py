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
"""
from __future__ import annotations

import gc

FREEZE_AFTER_CREATED = 1000


def freeze() -> None:
    """Move every object the collector tracks now out of its generations (see module doc)."""
    gc.freeze()
