"""A controller bench that times out asks the survivors for stack dumps (tools/controller_bench.py)."""
import subprocess
import sys
from pathlib import Path

from kafka_ha.broker import stack_dumps
from kafka_ha.tools.controller_bench import dump_stacks

# a stand-in broker process: the broker's own handler, then it waits
CHILD = ("import sys, time\n"
         "from kafka_ha.broker import stack_dumps\n"
         "stack_dumps.install(sys.argv[1])\n"
         "def waiting_like_a_hung_controller():\n"
         "    print('ready', flush=True)   # from inside: a dump now shows this frame\n"
         "    time.sleep(120)\n"
         "waiting_like_a_hung_controller()\n")


class Cluster:
    def __init__(self, root: Path, pids: dict) -> None:
        self.root, self.pids = root, pids

    def broker_pid(self, b):
        return self.pids.get(b)

    def broker_dir(self, b):
        return self.root / f"broker-{b}"


def test_each_live_broker_appends_its_stacks_and_a_dead_one_is_skipped(tmp_path):
    logs = tmp_path / "broker-2" / "logs"
    logs.mkdir(parents=True)
    (logs / stack_dumps.FILE_NAME).write_text("an older dump\n")
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(logs)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        dumped = dump_stacks(Cluster(tmp_path, {2: child.pid}), [2, 3], wait_s=60)
    finally:
        child.kill()
        child.wait()
    assert dumped == [logs / stack_dumps.FILE_NAME]
    text = dumped[0].read_text()
    assert text.startswith("an older dump\n") and "waiting_like_a_hung_controller" in text
