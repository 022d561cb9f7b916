"""The broker's ``/metrics`` endpoint (``metrics.port``): Prometheus text over HTTP.

prometheus_client's own ``start_http_server`` serves from a thread; the broker runs on
gevent, so the endpoint is a ``gevent.pywsgi`` server instead: each scrape is a
greenlet, and the collector's and the formatter's pauses (``gevent.sleep(0)`` every
``SCRAPE_SLICE`` partitions or samples) let requests and ZooKeeper heartbeats run in
between.  Only the broker's collector is exported (not the Python process collectors
of prometheus_client's default registry).
"""
from __future__ import annotations

import logging

import gevent
from gevent.pywsgi import WSGIServer

from kafka_ha import metrics
from kafka_ha.metrics import BrokerCollector, exposition

log = logging.getLogger(__name__)
# The classic text format, which every Prometheus 2.x parses.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _pause() -> None:
    gevent.sleep(0)


class ServerMetricsSource:
    """What a scrape reads from a running KafkaServer (each part may be missing at start-up)."""

    def __init__(self, server) -> None:
        self._server = server
        self.broker_id = server.broker_id
        if server.zk is not None:
            # Counts expirations, disconnections and connections from now on.
            server.zk.add_listener(metrics.zk_state_changed)

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

    def committed_offsets(self) -> dict:
        coordinator = self._server.group_coordinator
        return coordinator.catalog.offsets if coordinator is not None else {}

    def zk_state(self) -> str:
        zk = self._server.zk
        return str(zk.client_state) if zk is not None else "NOT_CONNECTED"


class MetricsEndpoint:
    def __init__(self, host: str, port: int, source) -> None:
        self.collector = BrokerCollector(source, _pause)
        self._server = WSGIServer((host, port), self._app, log=None,
                                  error_log=logging.getLogger("kafka_ha.metrics.http"))

    def _app(self, environ, start_response):
        if environ.get("PATH_INFO", "/") not in ("/metrics", "/"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"Only /metrics is served here\n"]
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Content-Type", "text/plain")])
            return [b"Use GET\n"]
        body = exposition(self.collector, _pause)
        start_response("200 OK", [("Content-Type", CONTENT_TYPE),
                                  ("Content-Length", str(len(body)))])
        return [] if environ["REQUEST_METHOD"] == "HEAD" else [body]

    @property
    def port(self) -> int:
        return self._server.server_port

    def start(self) -> None:
        self._server.start()
        log.info("Serving Prometheus metrics on port %d at /metrics", self.port)

    def stop(self) -> None:
        self._server.stop(timeout=1)
