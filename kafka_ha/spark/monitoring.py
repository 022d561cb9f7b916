"""How far a ``kafka_ha`` stream is behind, from Spark's streaming progress (pure).

Every micro-batch's progress carries, per source, ``startOffset``, ``endOffset``
and ``latestOffset`` in the source's offset JSON, ``{"topic": {"0": offset}}``.
The stream reader reports the partitions' high watermarks as ``latestOffset``
(``reportLatestOffset``), so ``latestOffset - endOffset`` is how many committed
records of each partition the query has not read yet.  Spark's own Kafka source
adds ``avgOffsetsBehindLatest``, ``maxOffsetsBehindLatest`` and
``minOffsetsBehindLatest`` to the progress's source ``metrics``; a Python data
source cannot add metrics (pyspark 4.2/4.3 has no such hook), so
:func:`offsets_behind` computes the same numbers from the progress, and
:func:`progress_listener` logs them as one line per batch.

>>> source = {"description": "kafka_ha", "numInputRows": 100,
...           "startOffset": {"t": {"0": 0, "1": 0}}, "endOffset": '{"t": {"0": 60, "1": 40}}',
...           "latestOffset": {"t": {"0": 200, "1": 40}}}
>>> behind = offsets_behind(source)
>>> behind["partitions"]
{'[t,0]': 140, '[t,1]': 0}
>>> behind["maxOffsetsBehindLatest"], behind["minOffsetsBehindLatest"], behind["avgOffsetsBehindLatest"]
(140, 0, 70.0)
>>> progress_line({"batchId": 3, "sources": [source]})
'batch 3: 100 rows; [t,0] 0..60 of 200 (140 behind), [t,1] 0..40 of 40 (0 behind); offsets behind latest: avg 70.0 max 140 min 0'
"""
from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger(__name__)


def _field(source: Any, name: str) -> Any:
    value = source.get(name) if isinstance(source, dict) else getattr(source, name, None)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value


def _per_partition(offsets: Any) -> dict[tuple[str, int], int]:
    if not isinstance(offsets, dict):
        return {}
    return {(topic, int(p)): int(o) for topic, parts in offsets.items()
            if isinstance(parts, dict) for p, o in parts.items()}


def offsets_behind(source: Any) -> dict | None:
    """Offsets behind latest, per partition and Spark's three summary metrics, of one
    source of a progress (a dict from ``query.lastProgress`` or a ``SourceProgress``);
    None if the source reported no latest offset."""
    end = _per_partition(_field(source, "endOffset"))
    latest = _per_partition(_field(source, "latestOffset"))
    if not end or not latest:
        return None
    behind = {tp: max(0, latest[tp] - end[tp]) for tp in sorted(end) if tp in latest}
    if not behind:
        return None
    values = list(behind.values())
    return {"partitions": {f"[{t},{p}]": n for (t, p), n in behind.items()},
            "avgOffsetsBehindLatest": sum(values) / len(values),
            "maxOffsetsBehindLatest": max(values),
            "minOffsetsBehindLatest": min(values)}


def progress_line(progress: Any) -> str:
    """One line per batch: rows, each partition's offsets ``start..end of latest`` and lag."""
    batch = _field(progress, "batchId")
    sources = progress.get("sources") if isinstance(progress, dict) else progress.sources
    parts = []
    for source in sources or ():
        start = _per_partition(_field(source, "startOffset"))
        end = _per_partition(_field(source, "endOffset"))
        latest = _per_partition(_field(source, "latestOffset"))
        behind = offsets_behind(source)
        if behind is None:
            continue
        cells = [f"[{t},{p}] {start.get((t, p), end[(t, p)])}..{end[(t, p)]} of "
                 f"{latest[(t, p)]} ({behind['partitions'][f'[{t},{p}]']} behind)"
                 for t, p in sorted(end) if (t, p) in latest]
        parts.append(f"{_field(source, 'numInputRows')} rows; {', '.join(cells)}; offsets "
                     f"behind latest: avg {behind['avgOffsetsBehindLatest']:.1f} max "
                     f"{behind['maxOffsetsBehindLatest']} min {behind['minOffsetsBehindLatest']}")
    return f"batch {batch}: " + " | ".join(parts)


def progress_listener():
    """A ``StreamingQueryListener`` logging :func:`progress_line` for every batch (INFO, logger
    ``kafka_ha.spark.monitoring``): ``spark.streams.addListener(progress_listener())``."""
    from pyspark.sql.streaming import StreamingQueryListener

    class ProgressLogger(StreamingQueryListener):
        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:
            log.info("%s", progress_line(event.progress))

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            pass

    return ProgressLogger()
