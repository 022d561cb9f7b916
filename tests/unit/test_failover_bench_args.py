"""kafka-failover-bench.sh refuses a size or scenario listed twice: both runs would share one
directory, and the second cluster would start on the first one's logs (a run listed
``--scenario shutdown,shutdown`` failed its first writes, 8,672 of 10,000 acknowledged).
``--repeat`` gives each run a directory of its own."""
from __future__ import annotations

import pytest

from kafka_ha.tools import failover_bench


@pytest.mark.parametrize("args, named", [
    (["--scenario", "shutdown,shutdown"], "shutdown"),
    (["--partitions", "1000,3000,1000"], "1000"),
])
def test_a_size_or_scenario_listed_twice_is_refused_before_anything_starts(args, named, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        failover_bench.main(args + ["--dir", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "twice" in err and named in err and "--repeat" in err
    assert list(tmp_path.iterdir()) == []           # no ZooKeeper was started
