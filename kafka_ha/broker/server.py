"""A broker process's composition root: ZooKeeper, registration, controller, listener.

Start-up order follows Kafka: connect to ZooKeeper and load the logs (both at
once: the logs load off the event loop, :mod:`.log_loading`), ensure the common
paths (both ZooKeeper steps wait as long as ZooKeeper is unavailable,
:mod:`.startup_retry`), start the request listener (so the controller can
reach us the moment we register), then let the controller's event loop
register the broker and run for controller.
"""
from __future__ import annotations

import logging

import gevent
from gevent.event import Event

from kafka_ha import cooperative, metrics
from kafka_ha.admin.assignment import AdminOperationError, assign_replicas
from kafka_ha.admin.zk_admin import ZkAdmin
from kafka_ha.broker.config_admin_apis import ConfigAdminApis
from kafka_ha.broker.admin_election_apis import AdminElectionApis
from kafka_ha.broker.config_changes import ConfigChangeWatcher
from kafka_ha.broker.controlled_shutdown import controlled_shutdown
from kafka_ha.broker.controller_requests import ControllerRequestGuard
from kafka_ha.broker import logging_setup, stack_dumps
from kafka_ha.broker.data_apis import DataApis
from kafka_ha.broker.dynamic_config import DynamicBrokerConfig
from kafka_ha.broker.fetch_sessions import FetchSessionCache
from kafka_ha.broker.group_coordinator import start_group_coordinator
from kafka_ha.broker.group_offsets import GroupOffsets
from kafka_ha.broker.isr_writer import IsrWriter
from kafka_ha.broker.kafka_apis import KafkaApis, by_version
from kafka_ha.broker.log_admin_apis import LogAdminApis
from kafka_ha.broker.log_cleaner import LogCleaner
from kafka_ha.broker.log_loading import load_logs, recovery_threads
from kafka_ha.broker.metrics_http import MetricsEndpoint, ServerMetricsSource
from kafka_ha.broker.metadata_cache import MetadataCache
from kafka_ha.broker.producer_ids import InitProducerIdApi, ProducerIdManager
from kafka_ha.broker.registration import BrokerRegistration
from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.broker.replication_quota import ReplicationQuota
from kafka_ha.broker.startup_retry import until_zookeeper_answers
from kafka_ha.broker.topic_admin_apis import TopicAdminApis
from kafka_ha.broker.topic_configs import TopicConfigs
from kafka_ha.clock import monotonic_ms
from kafka_ha.config import BrokerConfig
from kafka_ha.controller import events as ev
from kafka_ha.coordinator.placement import OFFSETS_TOPIC
from kafka_ha.controller.controller import KafkaController
from kafka_ha.log.config import LogConfig
from kafka_ha.log.log_manager import LogManager
from kafka_ha.model import BrokerEndpoint, BrokerInfo
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.memory_pool import RequestMemoryPool
from kafka_ha.protocol.server import ProtocolServer
from kafka_ha.zk import znodes as zn
from kafka_ha.zk.admin_store import AdminStore
from kafka_ha.zk.broker_store import BrokerStore
from kafka_ha.zk.client import connect, describe_connection
from kafka_ha.zk.controller_store import ControllerStore
from kafka_ha.zk.errors import MalformedZnode, ZkNodeExists
from kafka_ha.zk.producer_id_store import ProducerIdBlockStore

log = logging.getLogger(__name__)


class KafkaServer:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.stopped = Event()
        self.zk = None  # the client, under the stores
        self.store: BrokerStore | None = None
        self.topic_configs: TopicConfigs | None = None   # once ZooKeeper answers
        self.controller: KafkaController | None = None
        self.registration: BrokerRegistration | None = None
        self.listener: ProtocolServer | None = None
        self.replica_manager: ReplicaManager | None = None
        self.isr_writer: IsrWriter | None = None
        self.config_watcher: ConfigChangeWatcher | None = None
        self.log_cleaner: LogCleaner | None = None
        self.group_coordinator = None
        self.metrics_endpoint: MetricsEndpoint | None = None
        self.metadata = MetadataCache(self.broker_id)

    def startup(self) -> None:
        log.info("[Kafka Server %d], starting", self.broker_id)
        cfg = self.config
        # Connecting and loading the logs overlap: the logs load in threads, so the loop
        # is free to connect, and then to keep the new session alive however long
        # loading takes.
        connecting = gevent.spawn(until_zookeeper_answers, "connecting to ZooKeeper",
                                  self._connect, gevent.sleep)
        try:
            # Logs are recovered before the broker registers: a corrupt checkpoint
            # stops the start-up here with a clear error rather than serve bad data.
            self.log_manager = load_logs(
                lambda open_logs: LogManager(list(cfg.log_dirs), self._log_config(None),
                                             open_logs=open_logs),
                recovery_threads(cfg))
        except BaseException:
            connecting.kill()
            raise
        self.zk = connecting.get()
        stack_dumps.add_describer(lambda: describe_connection(self.zk))
        self.store = BrokerStore(self.zk)
        self.topic_configs = TopicConfigs(self.store, cfg)
        # Logs were loaded with the broker's defaults (the topic overrides live in
        # ZooKeeper, which loading does not wait for); they get their topic's overrides
        # (cleanup.policy, retention.ms...) before anything uses them.
        self.log_manager.use_topic_configs(self._log_config)
        self.isr_writer = IsrWriter(self.store, self.broker_id)
        self.leader_quota, self.follower_quota = (self._replication_quota(side)
                                                  for side in ("leader", "follower"))
        self.dynamic_config = DynamicBrokerConfig(self.store, cfg, self.leader_quota,
                                                  self.follower_quota, logging_setup.apply_levels)
        self.dynamic_config.reload()
        self.replica_manager = ReplicaManager(cfg, self.log_manager, self.isr_writer,
                                              self.topic_configs.min_isr, self._log_config,
                                              self._endpoint_of,
                                              being_deleted=self.metadata.being_deleted,
                                              partition_exists=self.metadata.knows,
                                              follower_quota=self.follower_quota)
        host, port = cfg.bind_address
        self.listener = ProtocolServer(host, port, metrics.timed(self._handle),
                                       cfg["socket.request.max.bytes"],
                                       logging.getLogger("kafka_ha.network"),
                                       RequestMemoryPool(cfg["queued.max.request.bytes"]),
                                       idle_timeout_s=cfg["connections.max.idle.ms"] / 1000,
                                       request_read_timeout_s=cfg["socket.request.read.timeout.ms"] / 1000,
                                       max_connections_per_ip=cfg["max.connections.per.ip"])
        self.listener.start()
        if cfg["metrics.port"] >= 0:
            self.metrics_endpoint = MetricsEndpoint(host, cfg["metrics.port"], ServerMetricsSource(self))
            self.metrics_endpoint.start()
        adv_host, adv_port = cfg.advertised_address
        adv_port = adv_port or self.listener.server_port  # port 0 binds an ephemeral port
        data_apis = DataApis(self.replica_manager.hosted, self.topic_configs.max_message_bytes,
                             FetchSessionCache(cfg["max.incremental.fetch.session.cache.slots"],
                                               cfg["min.incremental.fetch.session.eviction.ms"]),
                             fetch_max_bytes=cfg["fetch.max.bytes"], leader_quota=self.leader_quota)
        guard = ControllerRequestGuard(self.broker_id, self.store.active_controller)
        self.group_coordinator, group_apis = start_group_coordinator(
            cfg, self.metadata, self.replica_manager.hosted, GroupOffsets(self.store),
            self._create_topic)
        self.handler = KafkaApis(self.replica_manager, self.metadata, data_apis, group_apis,
                                 self._auto_create_topics, self._controlled_shutdown_request, guard)
        producer_ids = ProducerIdManager(self.broker_id, ProducerIdBlockStore(self.zk).claim_next_block)
        self.handler.apis[ApiKey.INIT_PRODUCER_ID] = by_version(InitProducerIdApi(producer_ids).handle)
        self._add_admin_apis()
        self.replica_manager.start_tasks()
        if cfg["log.cleaner.enable"]:
            self.log_cleaner = LogCleaner(self.log_manager, self._high_watermarks, cfg)
            self.log_cleaner.start()
        info = BrokerInfo(self.broker_id, adv_host, adv_port,
                          endpoints=(zn.endpoint_string(adv_host, adv_port),),
                          rack=cfg["broker.rack"] or None)
        registration = self.registration = BrokerRegistration(self.store, info, cfg.session_timeout_ms)
        guard.own_epoch = registration.wait_for_epoch
        until_zookeeper_answers("creating the common paths", registration.ensure_common_paths,
                                gevent.sleep)
        self.metadata.cluster_id = until_zookeeper_answers("reading the cluster id", self._cluster_id,
                                                           gevent.sleep)
        self.controller = KafkaController(cfg, ControllerStore(self.zk, self.broker_id),
                                          registration.register)
        self.controller.start()
        self.config_watcher = ConfigChangeWatcher(self.store, self._topic_config_changed,
                                                  self._broker_config_changed,
                                                  self.dynamic_config.reload)
        log.info("[Kafka Server %d], started", self.broker_id)

    def _add_admin_apis(self) -> None:
        """The admin requests: topics (topic_admin_apis), configs and logs (config_admin_apis,
        log_admin_apis), elections and reassignments (admin_election_apis)."""
        topics = TopicAdminApis(ZkAdmin(client=self.zk), self.metadata, self._is_controller,
                                self.config["delete.topic.enable"])
        self.handler.apis.update({key: by_version(handler) for key, handler in topics.handlers().items()})
        configs = ConfigAdminApis(self.broker_id, ZkAdmin(client=self.zk), self.topic_configs)
        logs = LogAdminApis(self.replica_manager.hosted, self.log_manager,
                            self.replica_manager.checkpoint_log_start_offsets)
        self.handler.apis.update({
            ApiKey.DESCRIBE_CONFIGS: by_version(configs.describe_configs),
            ApiKey.ALTER_CONFIGS: by_version(configs.alter_configs),
            ApiKey.INCREMENTAL_ALTER_CONFIGS: by_version(configs.incremental_alter_configs),
            ApiKey.DELETE_RECORDS: by_version(logs.delete_records),
            ApiKey.DESCRIBE_LOG_DIRS: by_version(logs.describe_log_dirs),
        })
        elections = AdminElectionApis(self._controller_context, AdminStore(self.zk))
        self.handler.apis.update({key: by_version(handler)
                                  for key, handler in elections.handlers().items()})

    def _connect(self):
        cfg = self.config
        return connect(cfg["zookeeper.connect"], cfg.session_timeout_ms,
                       cfg["zookeeper.connection.timeout.ms"] or None)

    def _controller_context(self):
        """The active controller's context on the controller broker, else None."""
        term = self.controller.term if self.controller is not None else None
        return term.ctx if term is not None else None

    def _is_controller(self) -> bool:
        return self.controller is not None and self.controller.active

    def _handle(self, header, reader):
        return self.handler.handle(header, reader)

    def _log_config(self, topic: str | None) -> LogConfig:
        """A topic's log settings: its overrides, else the broker's defaults (the defaults
        alone while the logs load, before ZooKeeper and the overrides are there)."""
        configs = self.topic_configs or TopicConfigs(None, self.config)
        return configs.log_config(topic)

    def _high_watermarks(self):
        return {tp: p.high_watermark for tp, p in self.replica_manager.partitions.items()}

    def _endpoint_of(self, broker_id: int) -> BrokerEndpoint | None:
        return self.metadata.brokers.get(broker_id)

    def _auto_create_topics(self, topics: list[str]) -> None:
        """Metadata for an unknown topic creates it (auto.create.topics.enable), as Kafka does."""
        cfg = self.config
        if not cfg["auto.create.topics.enable"]:
            return
        admin = ZkAdmin(client=self.zk)
        # Kafka's RackAwareMode.Safe: racks are used only if every broker has one.
        brokers = ({b: self.metadata.racks.get(b) for b in self.metadata.brokers}
                   or admin.store.live_broker_racks())
        for topic in topics:
            if topic == OFFSETS_TOPIC:
                continue   # the group coordinator creates it, with its own partitions and configs
            try:
                zn.validate_topic_name(topic)
                replicas = assign_replicas(brokers, cfg["num.partitions"],
                                           cfg["default.replication.factor"], rack_aware=False)
                admin.create_topic(topic, replicas, {})
                log.info("Auto-created topic %s with %d partitions", topic, len(replicas))
            except ZkNodeExists:
                pass
            except (ValueError, AdminOperationError) as e:
                log.warning("Could not auto-create topic %s: %s", topic, e)

    def _create_topic(self, topic: str, replicas: dict, configs: dict) -> None:
        ZkAdmin(client=self.zk).create_topic(topic, replicas, configs)

    def _cluster_id(self) -> str | None:
        try:
            return self.store.cluster_id()
        except MalformedZnode as e:     # reported, never fatal: Metadata then has no cluster id
            log.error("Broker %d cannot read the cluster id: %s", self.broker_id, e)
            return None

    def _controlled_shutdown_request(self, body: dict, version: int) -> dict:
        timeout_s = self.config["controller.socket.timeout.ms"] / 1000
        return self.controller.request_controlled_shutdown(body["broker_id"], timeout_s,
                                                           body.get("broker_epoch", -1))

    def _replication_quota(self, side: str) -> ReplicationQuota:
        """The leader's or the follower's quota (KIP-73), over this broker's topic configs."""
        cfg, name = self.config, f"{side}.replication.throttled.replicas"
        return ReplicationQuota(self.broker_id, lambda topic: self.topic_configs.overrides(topic).get(name, ""),
                                cfg[f"{side}.replication.throttled.rate"], cfg["replication.quota.window.num"],
                                cfg["replication.quota.window.size.seconds"] * 1000,
                                clock_ms=monotonic_ms)

    def _broker_config_changed(self, entity: str) -> None:
        if self.dynamic_config.concerns(entity):
            self.dynamic_config.reload()
            for partition in cooperative.yielding(list(self.replica_manager.partitions.values())):
                partition.on_config_change()       # a new default min.insync.replicas

    def _topic_config_changed(self, topic: str) -> None:
        self.topic_configs.invalidate(topic)
        for tp, partition in self.replica_manager.partitions.items():
            if tp.topic == topic:
                partition.log.config = self._log_config(topic)
                partition.on_config_change()
        if self.controller is not None and self.controller.active:
            self.controller.enqueue(ev.TopicConfigChange(topic))

    def shutdown(self) -> None:
        log.info("[Kafka Server %d], shutting down", self.broker_id)
        cfg = self.config
        if cfg["controlled.shutdown.enable"] and self.store is not None:
            controlled_shutdown(lambda: self.metadata.controller_id, self.broker_id, self._endpoint_of,
                                self.registration.epoch if self.registration is not None else None,
                                cfg["controlled.shutdown.max.retries"],
                                cfg["controlled.shutdown.retry.backoff.ms"],
                                cfg["controller.socket.timeout.ms"] / 1000)
        if self.replica_manager is not None:
            # Before anything that can hold the loop: the answers waiting on partitions
            # the controller just moved go out now (ReplicaManager.stop_leading).
            self.replica_manager.stop_leading()
        if self.listener is not None:
            # Then no client waits on this broker any more: Metadata asked of it during the
            # log flush below was answered only at the exit (issue 23).
            self.listener.stop(timeout=0)
            self.listener.close_connections()
        if self.config_watcher is not None:
            self.config_watcher.stop()
        if self.controller is not None:
            self.controller.shutdown()
        if self.group_coordinator is not None:
            self.group_coordinator.stop()
        if self.metrics_endpoint is not None:
            self.metrics_endpoint.stop()
        if self.log_cleaner is not None:
            self.log_cleaner.stop()
        if self.replica_manager is not None:
            self.replica_manager.shutdown()
        if self.isr_writer is not None:
            self.isr_writer.stop()
        if self.zk is not None:
            try:
                self.zk.stop()
                self.zk.close()
            except Exception:  # already disconnected: nothing left to release
                log.debug("ZooKeeper client close failed", exc_info=True)
        log.info("[Kafka Server %d], shut down completed", self.broker_id)
        self.stopped.set()

    def await_shutdown(self) -> None:
        self.stopped.wait()

    def request_shutdown(self) -> None:
        """Signal-safe: run the shutdown on its own greenlet."""
        gevent.spawn(self.shutdown)
