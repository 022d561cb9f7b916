"""Test harness: real ZooKeeper ensembles and broker processes for integration and system tests.

- :mod:`tests.harness.ports`: free TCP ports outside the ephemeral range.
- :mod:`tests.harness.zk`: the session-wide ensemble (``shared_ensemble()``) and ``zkcli()``.
- :mod:`tests.harness.cluster`: ``ClusterFixture`` (brokers in a fresh chroot) and
  ``wait_until()``.

``tests/conftest.py`` exposes them as the ``zk_ensemble`` and ``cluster_factory`` fixtures.
"""
