"""Test harness: real ZooKeeper ensembles and broker processes, and an in-memory ZooKeeper.

- :mod:`tests.harness.ports`: free TCP ports outside the ephemeral range.
- :mod:`tests.harness.zk`: the session-wide ensemble (``shared_ensemble()``) and ``zkcli()``.
- :mod:`tests.harness.cluster`: ``ClusterFixture`` (brokers in a fresh chroot) and
  ``wait_until()``.

``tests/conftest.py`` exposes them as the ``zk_ensemble`` and ``cluster_factory`` fixtures.

In memory, for unit and contract tests:

- :mod:`tests.harness.fake_zookeeper`: ``FakeZooKeeper``, znodes and watches with kazoo's API.
- :mod:`tests.harness.fake_controller_store`: ``FakeControllerStore``, the controller's store
  on it, and the writes other parties make (brokers registering, leaders changing ISRs,
  another controller taking over).
- :mod:`tests.harness.controller_driver`: the real controller on the fake store, with a
  recording channel, one event at a time.
"""
