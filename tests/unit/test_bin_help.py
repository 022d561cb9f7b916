"""Every bin/ script answers --help with its usage and exit status 0, and does nothing
else: no cluster started, no install, no test run (issue 20, item 6)."""
import subprocess
from pathlib import Path

import pytest

BIN = Path(__file__).resolve().parents[2] / "bin"
SCRIPTS = sorted(p.name for p in BIN.glob("*.sh"))


def test_every_script_is_covered():
    assert len(SCRIPTS) >= 25 and "kafka-server-start.sh" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_help(script):
    done = subprocess.run(["bash", str(BIN / script), "--help"], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    usage = done.stdout + done.stderr
    assert "usage" in usage.lower()
    # argparse's table or Kafka's "Option  Description" table
    assert "options:" in usage or "Option" in usage and "------" in usage \
        or script == "kafka-e2e-latency.sh"   # Kafka's EndToEndLatency has only a USAGE line
    assert "install:" not in usage            # --help must not install anything
