"""/metrics on three real brokers, scraped by a real Prometheus server (Debian's package).

One cluster and one Prometheus for the module: the broker that is the controller is
killed with SIGKILL, the survivors' UnderReplicatedPartitions go above 0, and once it is
back every broker's value returns to 0 with exactly one active controller, all read
through Prometheus's HTTP API as an operator's dashboards and alerts would.
"""
import json
import shutil
import subprocess
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.harness.cluster import ClusterFixture
from tests.harness.kafka import create_topic
from tests.harness.ports import free_ports

pytestmark = pytest.mark.system

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = shutil.which("prometheus")
TOPIC = "metered"
GROUP = "metered-group"


class Prometheus:
    def __init__(self, targets: dict[int, int], rules: Path):
        self.dir = Path(tempfile.mkdtemp(prefix="kafka-ha-prometheus-"))
        self.port = free_ports(1)[0]
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "scrape_configs": [{
                "job_name": "kafka-ha",
                "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": {"broker": str(b)}}
                                   for b, port in targets.items()],
            }],
        }
        (self.dir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = open(self.dir / "prometheus.log", "wb")
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={self.dir / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.dir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
             "--log.level=warn"], stdout=self.log, stderr=subprocess.STDOUT)

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=5) as response:
            answer = json.load(response)
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, expr):
        """{broker label (or ""): value} of an instant query."""
        if self.process.poll() is not None:
            self.log.flush()
            raise AssertionError(f"prometheus exited with {self.process.returncode}: "
                                 f"{(self.dir / 'prometheus.log').read_text()[-2000:]}")
        try:
            result = self.api("query", query=expr)["result"]
        except OSError:
            return None   # not answering yet
        return {r["metric"].get("broker", ""): float(r["value"][1]) for r in result}

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def env(request):
    if PROMETHEUS is None:
        pytest.skip("the prometheus binary is not installed (Debian: apt-get install prometheus; "
                    "bin/install.sh installs it)")
    zk_ensemble = request.getfixturevalue("zk_ensemble")   # only once there is a Prometheus
    cluster = ClusterFixture(3, {"replica.lag.time.max.ms": 4000}, ensemble=zk_ensemble,
                             session_timeout_ms=4000)
    ports = dict(zip(cluster.broker_ids, free_ports(3)))
    for b, port in ports.items():
        cluster.set_broker_config(b, {"metrics.port": port})
    request.addfinalizer(cluster.stop)
    cluster.start()
    prometheus = Prometheus(ports, ROOT / "examples" / "prometheus-alerts.yml")
    request.addfinalizer(prometheus.stop)
    return cluster, prometheus, ports


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.headers["Content-Type"], response.read().decode()


def test_prometheus_sees_under_replication_after_kill_and_recovery(env):
    cluster, prom, ports = env
    create_topic(cluster, TOPIC, 6, 3)
    from kafka import KafkaConsumer, KafkaProducer
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")

    def produce(n):
        for i in range(n):
            producer.send(TOPIC, b"x" * 100, partition=i % 6)
        producer.flush(30)
    produce(50)
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=cluster.bootstrap_servers, group_id=GROUP,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000)
    consumed = sum(1 for _ in zip(range(50), consumer))
    consumer.commit()
    consumer.close()
    assert consumed == 50

    content_type, text = scrape(ports[1])
    assert content_type.startswith("text/plain; version=0.0.4")
    assert "# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge" in text
    all_up = cluster.wait_until(lambda: (up := prom.query("up")) and len(up) == 3
                                and all(v == 1 for v in up.values()) and up,
                                timeout=60, message="Prometheus does not scrape all three brokers")
    assert set(all_up) == {"1", "2", "3"}
    # The example alert rules load into a real Prometheus.
    groups = prom.api("rules")["groups"]
    assert groups and all(rule["health"] in ("ok", "unknown") for g in groups for rule in g["rules"])

    def converged(controllers_expected=1):
        urp = prom.query("kafka_server_replicamanager_underreplicatedpartitions")
        active = prom.query("sum(kafka_controller_kafkacontroller_activecontrollercount)")
        return (urp and len(urp) == 3 and all(v == 0 for v in urp.values())
                and active == {"": controllers_expected}) and urp
    cluster.wait_until(converged, timeout=60, message="not all brokers at 0 under-replicated")

    # What the produce and the consume did, as Prometheus sees it.
    written = prom.query(f'sum(kafka_log_log_logendoffset{{topic="{TOPIC}"}})')
    assert written == {"": 150.0}   # 50 records on each of 3 replicas
    # Consumer lag, recorded by the example rules from the leaders' high watermarks and the
    # coordinator's committed offsets: 0 after the commit, then the 10 records produced since.
    cluster.wait_until(lambda: prom.query(f'sum(kafka_consumergroup_lag{{consumergroup="{GROUP}"}})')
                       == {"": 0.0}, timeout=30, message="no lag of 0 after the commit")
    produce(10)
    producer.close()
    cluster.wait_until(lambda: prom.query(f'sum(kafka_consumergroup_lag{{consumergroup="{GROUP}"}})')
                       == {"": 10.0}, timeout=30, message="the group's lag is not 10")
    assert prom.query(f'sum(kafka_server_brokertopicmetrics_bytesin_total{{topic="{TOPIC}"}}) > 0')
    # 60 records produced, counted by their leaders only.
    cluster.wait_until(lambda: prom.query(
        f'sum(kafka_server_brokertopicmetrics_messagesin_total{{topic="{TOPIC}"}})') == {"": 60.0},
        timeout=30, message="MessagesIn does not sum to the 60 records produced")
    assert prom.query(f'sum(kafka_server_brokertopicmetrics_bytesout_total{{topic="{TOPIC}"}}) > 0')
    assert prom.query('sum(kafka_network_requestmetrics_requests_total{request="Produce"}) > 0')
    assert prom.query('sum(kafka_network_requestmetrics_totaltimems_count{request="Fetch"}) > 0')
    for fetch in ("FetchConsumer", "FetchFollower"):
        assert prom.query(f'sum(kafka_network_requestmetrics_requests_total{{request="{fetch}"}}) > 0')
    assert prom.query('sum(kafka_server_sessionexpirelistener_sessionstate{state="CONNECTED"})') \
        == {"": 3.0}
    zk_requests = prom.query("kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms_count > 0")
    assert set(zk_requests) == {"1", "2", "3"}
    # each broker times its cycle collector (kafkaServer-gc.log has the long runs)
    assert set(prom.query('python_gc_collection_seconds_count{generation="2"} >= 0')) == {"1", "2", "3"}
    elections_before = prom.query("kafka_controller_controllerstats_leaderelectionrateandtimems_count")

    victim = cluster.controller()
    survivors = {str(b) for b in cluster.broker_ids if b != victim}
    cluster.kill(victim)

    def survivors_under_replicated():
        urp = prom.query("kafka_server_replicamanager_underreplicatedpartitions")
        return urp and survivors <= set(urp) and all(urp[b] > 0 for b in survivors) and urp
    seen = cluster.wait_until(survivors_under_replicated, timeout=60,
                              message=f"survivors {survivors} never showed under-replicated partitions")
    print(f"after kill -9 of broker {victim}: under-replicated {seen}")
    # A survivor took over as controller; it counted the broker change as an election.
    cluster.wait_until(lambda: prom.query("sum(kafka_controller_kafkacontroller_activecontrollercount)")
                       == {"": 1.0}, timeout=30, message="no new active controller")
    assert prom.query("sum(kafka_controller_kafkacontroller_offlinepartitionscount)") == {"": 0.0}

    cluster.start_broker(victim)
    cluster.wait_registered([victim])
    final = cluster.wait_until(converged, timeout=90,
                               message="under-replicated partitions did not return to 0")
    print(f"after broker {victim} returned: under-replicated {final}")
    assert set(final) == {"1", "2", "3"}
    # The survivors' leaders let the returning follower back in: ISR expansions counted.
    expands = prom.query("sum(kafka_server_replicamanager_isrexpands_total)")
    assert expands and expands[""] > 0
    elections = prom.query("kafka_controller_controllerstats_leaderelectionrateandtimems_count")
    assert sum(elections.values()) > 0, (elections_before, elections)
