"""Fixtures shared by the unit tests."""
from __future__ import annotations

import logging

import pytest

from kafka_ha.broker import logging_setup


@pytest.fixture
def clean_logging():
    """Undo what logging_setup.configure adds: handlers, levels and the routed loggers' propagation."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    routed = {n: logging.getLogger(n).handlers[:] for n in logging_setup.ROUTES}
    yield
    for h in root.handlers[:]:
        if h not in saved[0]:
            root.removeHandler(h)
            h.close()
    root.setLevel(saved[1])
    for name, handlers in routed.items():
        logger = logging.getLogger(name)
        for h in logger.handlers[:]:
            if h not in handlers:
                logger.removeHandler(h)
                h.close()
        logger.propagate = True
    logging_setup.apply_levels((), (("kafka.controller", "INFO"), ("kafka", "INFO")))
