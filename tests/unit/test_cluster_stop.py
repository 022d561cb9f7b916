"""``kafka-ha-cluster.sh stop`` gives brokers time for their clean shutdown before SIGKILL.

A broker's clean stop is a controlled shutdown (up to 3 tries 5 s apart when every broker
stops at once) and then a flush of every log: at 10,000 partitions that took over a minute.
A SIGKILL in the middle makes the next start recover every log.  The stand-in broker here
is a process that takes a while to exit after SIGTERM, with the broker's config path in
its command line as the cluster tool expects of its brokers.
"""
import subprocess
import sys

from kafka_ha.tools.local_cluster import LocalCluster, main

# (the tool reaps its children, so the exit status is not ours to read: a file says it)
SLOW_EXIT = """
import pathlib, signal, sys, time
def clean_exit(*_):
    time.sleep(1.5)
    pathlib.Path(sys.argv[2]).write_text("clean")
    sys.exit(0)
signal.signal(signal.SIGTERM, clean_exit)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def slow_broker(tmp_path):
    cluster = LocalCluster(tmp_path, brokers=1, zk_connect="127.0.0.1:1")
    marker = tmp_path / "exited-cleanly"
    proc = subprocess.Popen([sys.executable, "-c", SLOW_EXIT, str(cluster.config_path(1)),
                             str(marker)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    cluster.pid_path(1).write_text(f"{proc.pid}\n")
    return marker


def stop(tmp_path, *extra):
    return main(["stop", "--dir", str(tmp_path), "--brokers", "1", "--zk-connect", "127.0.0.1:1",
                 *extra])


def test_stop_waits_for_a_broker_finishing_its_clean_shutdown(tmp_path, capsys):
    exited_cleanly = slow_broker(tmp_path)
    assert stop(tmp_path, "--stop-timeout", "30") == 0
    assert exited_cleanly.exists(), "the broker was killed instead of exiting by itself"
    assert "stopped brokers [1]" in capsys.readouterr().out


def test_stop_says_which_broker_it_had_to_kill(tmp_path, capsys):
    exited_cleanly = slow_broker(tmp_path)
    assert stop(tmp_path, "--stop-timeout", "0.2") == 0
    assert not exited_cleanly.exists()
    err = capsys.readouterr().err
    assert "broker 1 did not exit within 0.2 s of SIGTERM: sent SIGKILL" in err


def test_the_default_stop_timeout_leaves_room_for_a_large_flush(capsys):
    try:
        main(["--help"])
    except SystemExit:
        pass
    assert "SIGKILL after this many seconds (default 120)" in " ".join(capsys.readouterr().out.split())
