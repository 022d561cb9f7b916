"""A broker process's composition root: ZooKeeper, registration, controller, listener.

Start-up order follows Kafka: connect to ZooKeeper and ensure the common
paths, start the request listener (so the controller can reach us the moment
we register), then let the controller's event loop register the broker and
run for controller.
"""
from __future__ import annotations

import logging

import gevent
from gevent.event import Event

from kafka_ha.broker.metadata_cache import MetadataCache
from kafka_ha.broker.registration import BrokerRegistration
from kafka_ha.broker.replica_manager import ReplicaManager
from kafka_ha.broker.request_handler import RequestHandler
from kafka_ha.config import BrokerConfig
from kafka_ha.controller.controller import KafkaController
from kafka_ha.model import BrokerInfo
from kafka_ha.protocol.server import ProtocolServer
from kafka_ha.zk import znodes as zn
from kafka_ha.zk.client import connect

log = logging.getLogger(__name__)


class KafkaServer:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.stopped = Event()
        self.zk = None
        self.controller: KafkaController | None = None
        self.listener: ProtocolServer | None = None
        self.replica_manager = ReplicaManager(self.broker_id)
        self.metadata = MetadataCache(self.broker_id)

    def startup(self) -> None:
        log.info("[Kafka Server %d], starting", self.broker_id)
        cfg = self.config
        self.zk = connect(cfg["zookeeper.connect"], cfg.session_timeout_ms,
                          cfg["zookeeper.connection.timeout.ms"] or None)
        host, port = cfg.bind_address
        handler = RequestHandler(self.replica_manager, self.metadata)
        self.listener = ProtocolServer(host, port, handler.handle, cfg["socket.request.max.bytes"],
                                       logging.getLogger("kafka_ha.network"))
        self.listener.start()
        adv_host, adv_port = cfg.advertised_address
        adv_port = adv_port or self.listener.server_port  # port 0 binds an ephemeral port
        info = BrokerInfo(self.broker_id, adv_host, adv_port,
                          endpoints=(zn.endpoint_string(adv_host, adv_port),))
        registration = BrokerRegistration(self.zk, info, cfg.session_timeout_ms)
        registration.ensure_common_paths()
        self.controller = KafkaController(cfg, self.zk, registration.register)
        self.controller.start()
        log.info("[Kafka Server %d], started", self.broker_id)

    def shutdown(self) -> None:
        log.info("[Kafka Server %d], shutting down", self.broker_id)
        if self.controller is not None:
            self.controller.shutdown()
        if self.listener is not None:
            self.listener.stop(timeout=2)
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
