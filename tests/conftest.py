"""Shared pytest fixtures: the session's ZooKeeper ensemble and per-test broker clusters.

- ``zk_ensemble`` (session): a running 3-node ensemble (:func:`tests.harness.zk.shared_ensemble`),
  started on first use only, so unit-test runs never start Java.
- ``cluster_factory`` (function): ``cluster_factory(brokers=3, overrides=None, start=True,
  **kwargs)`` returns a started :class:`tests.harness.cluster.ClusterFixture` on a fresh
  chroot; every cluster made is stopped at teardown.  When the test fails, the tails of the
  brokers' ``server.out`` and ``server.log`` are added to its report and the cluster
  directory is kept.

Every test under tests/system carries the ``system`` marker, so ``-m "not system"`` runs
the unit and contract tiers (and the doctests) without broker processes.
"""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # --import-mode=importlib does not add it for us
    sys.path.insert(0, str(ROOT))

from tests.harness.cluster import ClusterFixture  # noqa: E402
from tests.harness.zk import shared_ensemble  # noqa: E402


SYSTEM_TIER = ROOT / "tests" / "system"


def pytest_collection_modifyitems(items):
    # Also a module that forgot its ``pytestmark``: deselecting the tier must leave out all of it.
    for item in items:
        if SYSTEM_TIER in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.system)


@pytest.fixture(scope="session")
def zk_ensemble():
    return shared_ensemble()


@pytest.fixture
def cluster_ensemble(zk_ensemble):
    """The ensemble ``cluster_factory`` builds on; a module whose tests kill ZooKeeper
    servers overrides this with an ensemble of its own."""
    return zk_ensemble


@pytest.fixture
def cluster_factory(request, cluster_ensemble):
    clusters = []
    request.node.kafka_ha_clusters = clusters

    def make(brokers=3, overrides=None, start=True, **kwargs):
        cluster = ClusterFixture(brokers, overrides, ensemble=cluster_ensemble, **kwargs)
        clusters.append(cluster)
        return cluster.start() if start else cluster

    yield make
    failed = any(getattr(request.node, f"rep_{when}", None) is not None
                 and getattr(request.node, f"rep_{when}").failed for when in ("setup", "call"))
    for cluster in reversed(clusters):
        cluster.stop(keep_dir=failed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
    if report.failed and report.when in ("setup", "call"):
        for cluster in getattr(item, "kafka_ha_clusters", ()):
            report.sections.append((f"cluster {cluster.dir} (chroot {cluster.chroot})",
                                    f"zookeeper.connect={cluster.connect_string}"))
            report.sections.extend(cluster.report_sections())
