"""The operations guide's procedures, run as written.

docs/operations.md writes each procedure a test runs as one fenced shell block whose opening
fence names it (```` ```sh procedure=rolling-restart ````).  A test takes that block verbatim
and runs it with bash, its inputs given as the environment variables the guide names, so the
guide cannot drift from what is tested.  The guide tells operators to extract a block the same
way (with sed), so what they run is what the test ran.
"""

import os
import subprocess
import sys
from pathlib import Path

from kafka_ha.tools.processes import pid_alive, pid_cmdline

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "operations.md"
FENCE = "```"


def procedure(name, text=None):
    """The body of the block ```` ```sh procedure=NAME ```` of ``text`` (default: the guide).

    >>> doc = "x\\n```sh procedure=a\\necho 1\\n\\necho 2\\n```\\n```sh\\nnot this\\n```\\n"
    >>> procedure("a", doc)
    'echo 1\\n\\necho 2\\n'
    >>> procedure("b", doc)
    Traceback (most recent call last):
    ...
    LookupError: docs/operations.md has no block ```sh procedure=b
    """
    text = GUIDE.read_text() if text is None else text
    opening = f"{FENCE}sh procedure={name}"
    lines = text.splitlines(keepends=True)
    starts = [k for k, line in enumerate(lines) if line.rstrip() == opening]
    if len(starts) != 1:
        raise LookupError(f"docs/operations.md has {'no' if not starts else 'more than one'} "
                          f"block {opening}")
    body = []
    for line in lines[starts[0] + 1:]:
        if line.rstrip() == FENCE:
            return "".join(body)
        body.append(line)
    raise LookupError(f"the block {opening} of docs/operations.md is not closed")


def run_procedure(name, env, cwd, timeout_s, scratch):
    """Run procedure ``name`` with bash from ``cwd``, ``env`` added to this process's
    environment: ``(rc, output)``, stdout and stderr merged in order.  The script is written to
    ``scratch`` (a directory) first, as an operator would save it."""
    script = Path(scratch) / f"{name}.sh"
    script.write_text(procedure(name))
    full_env = dict(os.environ, KAFKA_HA_PYTHON=sys.executable, **env)
    full_env.pop("LOG_DIR", None)  # server.out beside each config, as the harness has it
    done = subprocess.run(["bash", str(script)], cwd=cwd, env=full_env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout_s)
    return done.returncode, done.stdout


def broker_pid_of(config):
    """The pid of the live ``python -m kafka_ha.broker.main CONFIG`` process, or None: how a
    broker that a procedure started (``kafka-server-start.sh -daemon``) is found again."""
    config = str(Path(config).resolve())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        argv = pid_cmdline(int(entry.name))
        for k in range(len(argv) - 2):
            if argv[k] == "-m" and argv[k + 1] == "kafka_ha.broker.main" and argv[k + 2] == config:
                if pid_alive(int(entry.name)):
                    return int(entry.name)
    return None
