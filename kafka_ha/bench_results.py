"""What every benchmark writes: one JSON file per benchmark in ``bench-results/``.

A results file says how its numbers were made and where: the command line, the date,
the git commit, the machine (cores, memory, CPU model, kernel, Python, and the load
average at the start and the end, since the machines we run on are shared), the
method in a sentence or two, the raw numbers, and each target as a ratio to a
baseline measured in the same run.  It also carries the tables and plots the
benchmark wants shown, as numbers: ``bin/kafka-bench-report.sh`` formats them into
docs/benchmarks.md and draws the plots, and each benchmark prints the same tables
on its standard output with :func:`markdown`.

This module only uses the standard library, so that benchmarks at every level of
the package (the log's, the tools', Spark's) can share it without an import cycle.
"""
from __future__ import annotations

import atexit
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "bench-results"
SCHEMA = 1


def machine() -> dict:
    """The machine a benchmark runs on, as far as Linux tells us."""
    return {"cores": os.cpu_count(), "memory_gib": _memory_gib(), "cpu_model": _cpu_model(),
            "kernel": f"{platform.system()} {platform.release()}",
            "python": f"{platform.python_implementation()} {platform.python_version()}"}


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    except (OSError, StopIteration, ValueError):
        return None
    return round(kib / 2**20, 1)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages: on a shared machine, how busy it was."""
    return [round(v, 2) for v in os.getloadavg()]


def git_revision(root: Path = ROOT) -> dict:
    """The commit the code ran at, and whether the code (kafka_ha/, bin/) differed from it."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                                  timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None
    commit = git("rev-parse", "HEAD")
    changes = git("status", "--porcelain", "--untracked-files=no", "--", "kafka_ha", "bin")
    return {"commit": commit, "code_modified": None if changes is None else bool(changes)}


def ratio(target: str, value: float, baseline: str, baseline_value: float, unit: str,
          goal: str | None = None) -> dict:
    """One target against the baseline it is measured against in the same run.

    >>> ratio("write", 90, "raw multis", 60, "ms")["ratio"]
    1.5
    >>> ratio("read", 1, "nothing", 0, "ms")["ratio"] is None
    True
    """
    return {"target": target, "value": value, "baseline": baseline,
            "baseline_value": baseline_value, "unit": unit,
            "ratio": round(value / baseline_value, 4) if baseline_value else None, "goal": goal}


@dataclass
class Table:
    """A results table of numbers; ``columns`` are ``(heading, unit, decimals)``.

    A cell is a number (shown with its column's unit and decimals), a string, or None ("-").
    """

    title: str
    columns: list[tuple[str, str, int]]
    rows: list[list] = field(default_factory=list)
    note: str = ""

    def as_json(self) -> dict:
        return {"title": self.title, "note": self.note, "rows": self.rows,
                "columns": [{"heading": h, "unit": u, "decimals": d} for h, u, d in self.columns]}


def cell(value, unit: str = "", decimals: int = 0) -> str:
    """How a table shows a number.

    >>> cell(1234.567, "ms"), cell(0.891, "x", 2), cell(None, "s"), cell("acks=1"), cell(3, "", 0)
    ('1235 ms', '0.89x', '-', 'acks=1', '3')
    """
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    text = f"{value:.{decimals}f}"
    return text + (unit if unit in ("x", "%") else f" {unit}" if unit else "")


def markdown(table: dict) -> str:
    """A table (as stored in a results file) in Markdown: its title in bold, then the grid."""
    columns = table["columns"]
    lines = [f"**{table['title']}**", "",
             "| " + " | ".join(c["heading"] for c in columns) + " |",
             "|" + "|".join("---:" if _numeric(table["rows"], i) else "---"
                            for i in range(len(columns))) + "|"]
    for row in table["rows"]:
        lines.append("| " + " | ".join(cell(v, c["unit"], c["decimals"])
                                       for v, c in zip(row, columns)) + " |")
    if table.get("note"):
        lines += ["", table["note"]]
    return "\n".join(lines)


def _numeric(rows: list[list], column: int) -> bool:
    """Whether a column holds numbers (aligned right): a number, or text that starts with a digit.

    >>> _numeric([["a", 1], ["b", "2.0 s"]], 0), _numeric([["a", 1], ["b", "p50 2 s"]], 1)
    (False, True)
    """
    cells = [r[column] for r in rows if r[column] is not None]
    return any(not isinstance(v, str) or v[:1].isdigit() for v in cells)


def ratios_table(ratios: list[dict]) -> dict:
    """The targets against their same-run baselines, as a table."""
    rows = [[r["target"], _sized(r["value"], r["unit"]), r["baseline"],
             _sized(r["baseline_value"], r["unit"]), _times(r["ratio"]), r.get("goal")]
            for r in ratios]
    return Table("Against the baseline, measured in the same run",
                 [("target", "", 0), ("measured", "", 0), ("baseline", "", 0),
                  ("baseline measured", "", 0), ("ratio", "", 0), ("goal", "", 0)], rows).as_json()


def _times(value: float | None) -> str:
    """A ratio: two decimals, or two significant digits below 0.1.

    >>> _times(1.5655), _times(0.01312), _times(None)
    ('1.57x', '0.013x', '-')
    """
    if value is None:
        return "-"
    return f"{value:.2f}x" if abs(value) >= 0.1 else f"{value:.2g}x"


def _sized(value, unit: str) -> str:
    """A number with as many decimals as its size needs.

    >>> _sized(1234.5, "ms"), _sized(12.345, "MB/s"), _sized(0.0456, "ms"), _sized(None, "s")
    ('1234 ms', '12.3 MB/s', '0.05 ms', '-')
    """
    if value is None or isinstance(value, str):
        return cell(value)
    return cell(value, unit, 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2)


def command_line(prog: str, argv: list[str] | None) -> str:
    """How the benchmark was started, as one would type it again."""
    return " ".join([prog, shlex.join(sys.argv[1:] if argv is None else argv)]).strip()


def default_path(name: str) -> Path:
    return RESULTS_DIR / f"{name}.json"


def scratch_dir(prefix: str) -> str:
    """A new temporary working directory, removed when the benchmark's process exits.

    A benchmark given no ``--dir`` works here: its logs can be gigabytes, and a directory
    left behind by every run fills the disk (the brokers of the next run then halt on
    ENOSPC).  A ``--dir`` the user names is theirs, and is kept."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def add_output_options(parser, name: str | None, *aliases: str) -> None:
    """``--json PATH`` (default ``bench-results/<name>.json``; None if a benchmark chooses its
    name from its options) and ``--note TEXT``."""
    parser.add_argument("--json", *aliases, dest="json",
                        default=None if name is None else str(default_path(name)), metavar="PATH",
                        help="where to write the results (default: %(default)s)" if name else
                             "where to write the results (default: bench-results/<name>.json)")
    parser.add_argument("--note", default="",
                        help="a sentence about this run for the page, e.g. what else loaded the machine")


class Run:
    """One benchmark run: started before the measurements, written after them."""

    def __init__(self, bench: str, title: str, prog: str, argv: list[str] | None) -> None:
        self.envelope = {"schema": SCHEMA, "bench": bench, "title": title,
                         "command": command_line(prog, argv),
                         "date": datetime.now().astimezone().isoformat(timespec="seconds"),
                         **git_revision(), "machine": machine(),
                         "load_average": {"start": load_average()}}

    def write(self, path: str | Path, *, method: str, results: dict, ratios: list[dict],
              tables: list[Table], plots: list[dict] = (), note: str = "") -> dict:
        """Write the results file; returns what was written."""
        data = dict(self.envelope, method=method, note=note, ratios=ratios,
                    tables=[t.as_json() for t in tables], plots=list(plots), results=results)
        data["load_average"] = dict(data["load_average"], end=load_average())
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1, default=_json_default) + "\n")
        return data


def _json_default(value):
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} does not belong in a results file: {value!r}")


def print_summary(data: dict, path: str | Path, out=sys.stdout) -> None:
    """What a benchmark prints at its end: its tables in Markdown and where the file went."""
    parts = [markdown(t) for t in [ratios_table(data["ratios"])] + data["tables"]
             if t["rows"]]
    print("\n\n".join(parts), file=out)
    print(f"\nresults written to {path}; bin/kafka-bench-report.sh renders docs/benchmarks.md",
          file=out)
