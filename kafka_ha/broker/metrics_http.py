"""The broker's ``/metrics`` endpoint (``metrics.port``): Prometheus text over HTTP.

prometheus_client's own ``start_http_server`` serves from a thread; the broker runs on
gevent, so the endpoint is a ``gevent.pywsgi`` server around prometheus_client's WSGI
app instead: each scrape is a greenlet, and the collector's pauses
(``gevent.sleep(0)`` every few thousand partitions) let requests and ZooKeeper
heartbeats run in between.  Each broker has its own registry: nothing else (the
Python process collectors of the default registry) is exported.
"""
from __future__ import annotations

import logging

import gevent
from gevent.pywsgi import WSGIServer
from prometheus_client import CollectorRegistry, make_wsgi_app

from kafka_ha.metrics import BrokerCollector

log = logging.getLogger(__name__)


class ServerMetricsSource:
    """What a scrape reads from a running KafkaServer (each part may be missing at start-up)."""

    def __init__(self, server) -> None:
        self._server = server
        self.broker_id = server.broker_id

    def partitions(self) -> list:
        manager = self._server.replica_manager
        return list(manager.partitions.values()) if manager is not None else []

    def min_isr(self, topic: str) -> int:
        configs = self._server.topic_configs
        return configs.min_isr(topic) if configs is not None else self._server.config["min.insync.replicas"]

    def controller_context(self):
        controller = self._server.controller
        term = controller.term if controller is not None else None
        return term.ctx if term is not None else None

    def zk_state(self) -> str:
        zk = self._server.zk
        return str(zk.client_state) if zk is not None else "NOT_CONNECTED"


class MetricsEndpoint:
    def __init__(self, host: str, port: int, source) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(source, lambda: gevent.sleep(0)))
        self._server = WSGIServer((host, port), make_wsgi_app(self.registry), log=None,
                                  error_log=logging.getLogger("kafka_ha.metrics.http"))

    @property
    def port(self) -> int:
        return self._server.server_port

    def start(self) -> None:
        self._server.start()
        log.info("Serving Prometheus metrics on port %d at /metrics", self.port)

    def stop(self) -> None:
        self._server.stop(timeout=1)
