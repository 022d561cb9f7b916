"""Operator logs in Kafka's layout: server.log, controller.log and state-change.log.

Lines use Kafka's log4j pattern ``[%d] %p %m (%c)%n`` so tools and eyes used to
Kafka's logs read ours the same way.
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from kafka_ha.broker.log_flood_guard import FloodGuard
from kafka_ha.state_change_log import LOGGER_NAME, PrefixEachLine

FORMAT = "[%(asctime)s,%(msecs)03d] %(levelname)s %(message)s (%(name)s)"
DATEFMT = "%Y-%m-%d %H:%M:%S"

# logger name -> file, as Kafka's config/log4j.properties routes them
ROUTES = {"kafka_ha.controller": "controller.log", LOGGER_NAME: "state-change.log"}


def log_dir_for(config_path: str) -> Path:
    """``$LOG_DIR`` as in Kafka's scripts, else ``logs/`` beside the config file."""
    env = os.environ.get("LOG_DIR")
    return Path(env) if env else Path(config_path).resolve().parent / "logs"


def configure(log_dir: Path, level: int = logging.INFO) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    formatter = PrefixEachLine(FORMAT, DATEFMT)
    guard = FloodGuard()   # one for every handler: a record is judged once

    def handler(name: str) -> logging.Handler:
        h = logging.FileHandler(log_dir / name, encoding="utf-8")
        h.setFormatter(formatter)
        h.addFilter(guard)
        return h

    root = logging.getLogger()
    root.setLevel(level)
    root.addHandler(handler("server.log"))
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(formatter)
    console.setLevel(logging.WARNING)
    console.addFilter(guard)
    root.addHandler(console)
    for logger_name, file_name in ROUTES.items():
        logger = logging.getLogger(logger_name)
        logger.addHandler(handler(file_name))
        # Controller lines also reach server.log (Kafka's additivity default);
        # state-change lines are too many for it and stay in their own file.
        logger.propagate = logger_name != LOGGER_NAME
    logging.getLogger("kazoo").setLevel(logging.WARNING)
