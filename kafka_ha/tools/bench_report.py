"""``kafka-bench-report.sh``: docs/benchmarks.md and its plots, rendered from bench-results/*.json.

Every benchmark writes its latest run to ``bench-results/<name>.json`` (see
kafka_ha/bench_results.py): command, date, commit, machine, method, the targets as
ratios to a baseline measured in the same run, its tables and plots as numbers, and
the raw results.  This tool turns those files into one page, a section per
benchmark, and draws each plot as an SVG in docs/img/ (``bench-<name>.svg``).
The page is never edited by hand: ``--check`` (and a unit test) fails when it or
an image differs from what the results files give.

    bin/kafka-bench-report.sh            # rewrite docs/benchmarks.md and docs/img/bench-*.svg
    bin/kafka-bench-report.sh --check    # exit 1, naming the files, if they are stale
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from kafka_ha.bench_results import RESULTS_DIR, ROOT, SCHEMA, markdown, ratios_table
from kafka_ha.tools.bench_svg import bar_chart, line_chart

PAGE = ROOT / "docs" / "benchmarks.md"
IMG_DIR = ROOT / "docs" / "img"
IMG_PREFIX = "bench-"
# The page's order; a results file of another name comes after these, by name.
ORDER = ["failover", "controller", "data", "idempotence", "throttle", "log", "log-epochs", "spark"]
REQUIRED = ("schema", "bench", "title", "command", "date", "commit", "machine", "load_average",
            "method", "ratios", "tables", "plots", "results")
CHARTS = {"bar": bar_chart, "line": line_chart}

INTRO = """\
Each section is the latest run of one benchmark, rendered by `bin/kafka-bench-report.sh`
from the results file the benchmark wrote in `bench-results/`. Each benchmark measures a
baseline in the same run (what ZooKeeper, the socket layer, the disk or our own client
costs without the code under test) and states its targets as ratios to it: the machines
these runs come from are shared and their speed moves from one hour to the next, so
absolute numbers from different runs do not compare, ratios within one run do. The
machine line gives the load average at the start and the end of the run.

To refresh a section, run its benchmark with the command shown (sizes are options), then
`bin/kafka-bench-report.sh`. A unit test (tests/unit/test_bench_report.py) fails while this
page or its plots differ from what `bench-results/` gives, so do not edit the page by hand.

Earlier runs, with the analyses written at the time, are in git:
`git log -p docs/benchmarks.md` and `git log -p bench-results/`."""


class ResultsError(ValueError):
    """A results file that the page cannot be made from."""


def load(results_dir: Path = RESULTS_DIR) -> list[dict]:
    """Every results file in ``results_dir``, in the page's order, checked for what the page needs."""
    runs = []
    for path in sorted(Path(results_dir).glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise ResultsError(f"{path}: not readable as JSON: {e}") from None
        missing = [k for k in REQUIRED if k not in data] if isinstance(data, dict) else REQUIRED
        if missing:
            raise ResultsError(f"{path}: not a results file of schema {SCHEMA} "
                               f"(missing {', '.join(missing)})")
        if data["schema"] != SCHEMA:
            raise ResultsError(f"{path}: schema {data['schema']}, this renderer reads {SCHEMA}")
        if data["bench"] != path.stem:
            raise ResultsError(f"{path}: holds the results of {data['bench']!r}; "
                               f"each benchmark writes {data['bench']}.json")
        for plot in data["plots"]:
            if plot.get("kind") not in CHARTS:
                raise ResultsError(f"{path}: plot {plot.get('file')!r} is of unknown kind "
                                   f"{plot.get('kind')!r} (known: {', '.join(CHARTS)})")
        runs.append(data)
    if not runs:
        raise ResultsError(f"no results files (*.json) in {results_dir}")
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(runs, key=lambda d: (rank.get(d["bench"], len(ORDER)), d["bench"]))


def image_name(plot: dict) -> str:
    return f"{IMG_PREFIX}{plot['file']}.svg"


def draw(plot: dict) -> str:
    """A plot spec from a results file as an SVG document."""
    x = [str(v) for v in plot["x"]] if plot["kind"] == "bar" else plot["x"]
    return CHARTS[plot["kind"]](plot["title"], x, plot["series"], plot["x_label"], plot["y_label"])


def machine_line(data: dict) -> str:
    m, load = data["machine"], data["load_average"]
    memory = f"{m['memory_gib']} GiB" if m.get("memory_gib") else "memory unknown"
    at_end = f", {load['end'][0]} at the end" if load.get("end") else ""
    return (f"{m['cores']} cores ({m['cpu_model']}), {memory}, {m['kernel']}, {m['python']}; "
            f"1-minute load average {load['start'][0]} at the start{at_end}")


def run_line(data: dict) -> str:
    commit = (data["commit"] or "unknown")[:12]
    if data.get("code_modified"):
        commit += " with uncommitted changes to the code"
    return f"{data['date']}, commit `{commit}`: `{shown_command(data['command'])}`"


def heading(data: dict) -> str:
    """A section's title with the tool that made it (the anchors other pages link to).

    >>> heading({"title": "Spark", "command": "python -m kafka_ha.spark.bench --records 5"})
    'Spark (`python -m kafka_ha.spark.bench`)'
    >>> heading({"title": "Data", "command": "bin/kafka-data-bench.sh --records 5"})
    'Data (`bin/kafka-data-bench.sh`)'
    """
    words = data["command"].split()
    tool = words[:3] if words[:2] == ["python", "-m"] else words[:1]
    return f"{data['title']} (`{' '.join(tool)}`)"


def shown_command(command: str) -> str:
    """The command as the page shows it: without ``--note``, whose text has a line of its own.

    >>> shown_command("bin/x.sh --a 1 --note 'two words' --b 2,3 --note=x")
    'bin/x.sh --a 1 --b 2,3'
    """
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    shown, after_note = [], False
    for word in words:
        if not after_note and word != "--note" and not word.startswith("--note="):
            shown.append(word)
        after_note = word == "--note"
    return shlex.join(shown)


def section(data: dict, img_link: str) -> str:
    """One benchmark's part of the page."""
    parts = [f"## {heading(data)}", "", data["method"], "",
             f"- **Run:** {run_line(data)}", f"- **Machine:** {machine_line(data)}"]
    if data.get("note"):
        parts.append(f"- **Note:** {data['note']}")
    tables = ([ratios_table(data["ratios"])] if data["ratios"] else []) + data["tables"]
    for table in tables:
        parts += ["", markdown(table)]
    for plot in data["plots"]:
        parts += ["", f"![{plot['title']}]({img_link}/{image_name(plot)})"]
    return "\n".join(parts)


def render(runs: list[dict], page: Path = PAGE, img_dir: Path = IMG_DIR) -> dict[Path, str]:
    """The page and its images for ``runs``: path -> text."""
    img_link = Path(os.path.relpath(img_dir, page.parent)).as_posix()
    contents = ["| benchmark | run | commit |", "|---|---|---|"]
    contents += [f"| [{d['title']}](#{anchor(heading(d))}) | {d['date']} | "
                 f"`{(d['commit'] or 'unknown')[:12]}` |" for d in runs]
    body = ["# Benchmarks", "",
            "<!-- Generated by bin/kafka-bench-report.sh from bench-results/*.json: "
            "do not edit by hand. -->", "", INTRO, "", *contents]
    images: dict[Path, str] = {}
    for data in runs:
        body += ["", section(data, img_link)]
        for plot in data["plots"]:
            if img_dir / image_name(plot) in images:
                raise ResultsError(f"two plots would be drawn into {image_name(plot)}")
            images[img_dir / image_name(plot)] = draw(plot)
    return {page: "\n".join(body) + "\n", **images}


def anchor(title: str) -> str:
    """The id GitHub gives a heading.

    >>> anchor("Controller: re-election, load, watches (`bin/x.sh`)")
    'controller-re-election-load-watches-binxsh'
    """
    kept = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def stale(files: dict[Path, str], img_dir: Path = IMG_DIR) -> list[str]:
    """The files that differ from ``files``, and rendered images no results file asks for."""
    out = [f"{p}: {'differs' if p.exists() else 'missing'}" for p, text in files.items()
           if not p.exists() or p.read_text() != text]
    out += [f"{p}: no results file draws it" for p in sorted(img_dir.glob(f"{IMG_PREFIX}*.svg"))
            if p not in files]
    return out


def write(files: dict[Path, str], img_dir: Path = IMG_DIR) -> None:
    img_dir.mkdir(parents=True, exist_ok=True)
    for p in sorted(img_dir.glob(f"{IMG_PREFIX}*.svg")):
        if p not in files:
            p.unlink()
    for path, text in files.items():
        path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kafka-bench-report.sh", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", type=Path, default=RESULTS_DIR, help="results directory")
    p.add_argument("--page", type=Path, default=PAGE)
    p.add_argument("--img-dir", type=Path, default=IMG_DIR)
    p.add_argument("--check", action="store_true", help="only say whether the page is up to date")
    args = p.parse_args(argv)
    try:
        files = render(load(args.results), args.page, args.img_dir)
    except ResultsError as e:
        print(f"kafka-bench-report: {e}", file=sys.stderr)
        return 2
    if args.check:
        problems = stale(files, args.img_dir)
        for line in problems:
            print(line, file=sys.stderr)
        if problems:
            print("run bin/kafka-bench-report.sh to render them again", file=sys.stderr)
        return 1 if problems else 0
    write(files, args.img_dir)
    print(f"wrote {len(files)} files: {', '.join(str(p) for p in files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
