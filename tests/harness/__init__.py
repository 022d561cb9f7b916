"""Test harness: everything test modules share (a test module never imports another).

Real ZooKeeper and brokers, for contract and system tests:

- :mod:`tests.harness.ports`: free TCP ports outside the ephemeral range.
- :mod:`tests.harness.zk`: the session-wide ensemble (``shared_ensemble()``), private
  ensembles, and ``zkcli()``.
- :mod:`tests.harness.cluster`: ``ClusterFixture`` (brokers in a fresh chroot),
  ``wait_until()`` and ``SESSION_MS``, the short session timeout of the fault tests.
- :mod:`tests.harness.kafka`: the real CLI tools, znode reads, broker logs, ``wait_isr`` and
  ``verify_replicas``.
- :mod:`tests.harness.load`: producing and reading records, a background producer, and the
  history checker.
- :mod:`tests.harness.partition_faults`: one partition under faults (acks=all values that
  must survive, produces queued for a zombie leader, a follower that stops fetching).
- :mod:`tests.harness.replica_files`: what a broker holds on disk.
- :mod:`tests.harness.spark_standalone`: a Spark standalone master and workers from the
  installed pyspark, for running a driver with ``--master spark://...``.
- :mod:`tests.harness.tcp_proxy`, :mod:`tests.harness.broker_relay`,
  :mod:`tests.harness.zk_gate`: connections that can be cut, held or filtered.

``tests/conftest.py`` exposes the ensemble and clusters as the ``zk_ensemble`` and
``cluster_factory`` fixtures.

In memory, for unit and contract tests:

- :mod:`tests.harness.fake_zookeeper`: ``FakeZooKeeper``, znodes and watches with kazoo's API.
- :mod:`tests.harness.fake_kazoo`: ``FakeKazooClient``, a session on it with the rest of kazoo's
  client API, on which the real broker, admin and bench stores run.
- :mod:`tests.harness.fake_controller_store`: ``FakeControllerStore``, the controller's store
  on it, and the writes other parties make (brokers registering, leaders changing ISRs,
  another controller taking over).
- :mod:`tests.harness.controller_driver`: the real controller on the fake store, with a
  recording channel, one event at a time.
- :mod:`tests.harness.fake_cluster`: ``FakeCluster``, fake Kafka brokers on real sockets for
  the client and tool tests.
- :mod:`tests.harness.leader_setup`: a leader Partition over a real Log, and ISR writers that
  record or refuse changes; :mod:`tests.harness.full_disk`: a disk that fills up;
  :mod:`tests.harness.protocol_samples`: sample bodies of every protocol schema.
- :mod:`tests.harness.fake_leader`: a leader answering the replica fetcher from real logs, with
  the errors a test sets.
"""
