"""Operator logs in Kafka's layout: server.log, controller.log and state-change.log.

Lines use Kafka's log4j pattern ``[%d] %p %m (%c)%n`` so tools and eyes used to
Kafka's logs read ours the same way.  Files roll by size (``logger.file.max.bytes``,
``logger.file.backups``) where Kafka's log4j.properties rolls daily: a size bound
is what keeps a disk from filling.  Levels are set per logger with Kafka's logger
names (``logger.levels``, mapped by KAFKA_LOGGERS) and re-applied on SIGHUP.
"""
from __future__ import annotations

import logging
import logging.handlers
import os
import sys
from pathlib import Path

from kafka_ha.broker.log_flood_guard import FloodGuard
from kafka_ha.state_change_log import LOGGER_NAME, PrefixEachLine

FORMAT = "[%(asctime)s,%(msecs)03d] %(levelname)s %(message)s (%(name)s)"
DATEFMT = "%Y-%m-%d %H:%M:%S"

# logger name -> file, as Kafka's config/log4j.properties routes them
ROUTES = {"kafka_ha.controller": "controller.log", LOGGER_NAME: "state-change.log",
          "kafka_ha.gc": "kafkaServer-gc.log"}

# Kafka's logger names (log4j.properties, kafka-configs --entity-type broker-loggers)
# -> the Python loggers that do that work here; a name not listed is used as given.
KAFKA_LOGGERS = {
    "kafka": "kafka_ha",
    "kafka.controller": "kafka_ha.controller",
    "state.change.logger": LOGGER_NAME,
    "kafka.network": "kafka_ha.network",
    "kafka.request.logger": "kafka_ha.protocol",
    "kafka.server": "kafka_ha.broker",
    "kafka.log": "kafka_ha.log",
    "kafka.log.LogCleaner": "kafka_ha.broker.log_cleaner",
    "kafka.coordinator": "kafka_ha.coordinator",
    "kafka.zookeeper": "kafka_ha.zk",
    "kafka.zk": "kafka_ha.zk",
    "org.apache.zookeeper": "kazoo",
}
# log4j's levels; TRACE has no stdlib level, so it is DEBUG's neighbour below it
TRACE = 5
_LEVELS = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
           "WARN": logging.WARNING, "WARNING": logging.WARNING, "ERROR": logging.ERROR,
           "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}
logging.addLevelName(TRACE, "TRACE")


def python_logger(kafka_name: str) -> str:
    """>>> python_logger("state.change.logger"), python_logger("kafka_ha.log.segment")
    ('state.change', 'kafka_ha.log.segment')
    """
    return KAFKA_LOGGERS.get(kafka_name, kafka_name)


def apply_levels(levels: tuple[tuple[str, str], ...],
                 previous: tuple[tuple[str, str], ...] = ()) -> None:
    """Set each named logger's level; loggers named before but not now go back to
    inheriting (NOTSET), so removing a line on SIGHUP undoes it."""
    for name, _ in previous:
        logging.getLogger(python_logger(name)).setLevel(logging.NOTSET)
    logging.getLogger("kazoo").setLevel(logging.WARNING)   # its DEBUG is every packet
    for name, level in levels:
        logging.getLogger(python_logger(name)).setLevel(_LEVELS[level])


def log_dir_for(config_path: str) -> Path:
    """``$LOG_DIR`` as in Kafka's scripts, else ``logs/`` beside the config file."""
    env = os.environ.get("LOG_DIR")
    return Path(env) if env else Path(config_path).resolve().parent / "logs"


def configure(log_dir: Path, level: int = logging.INFO, max_bytes: int = 104857600,
              backups: int = 10, levels: tuple[tuple[str, str], ...] = ()) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    formatter = PrefixEachLine(FORMAT, DATEFMT)
    guard = FloodGuard()   # one for every handler: a record is judged once

    def handler(name: str) -> logging.Handler:
        h = logging.handlers.RotatingFileHandler(
            log_dir / name, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
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
        # state-change lines are too many for it and stay in their own file, and the
        # collector's lines are in theirs, as the JVM's GC log is.
        logger.propagate = logger_name == "kafka_ha.controller"
    apply_levels(levels)
