"""What the admin commands share: Kafka's --zookeeper flag, --wait/--timeout, usage errors.

Kafka's tools print a usage error's message, then the usage, and (from 0.9)
exit 1; every command here does the same through ``usage_error``.
"""
from __future__ import annotations

import argparse

from kafka_ha.zk.errors import ZkUnavailable, error_text

# ZooKeeper went away mid-command (no quorum, say): errors which carry no text...
ZK_LOST = (ZkUnavailable,)
# ...or could not be reached at all (ZkAdmin's ConnectionError): a command reports
# either in one line and exits 1, without a traceback.
ZK_UNAVAILABLE = (ConnectionError, *ZK_LOST)

ZOOKEEPER_HELP = ("REQUIRED: The connection string for the zookeeper connection in the form "
                  "host:port. Multiple URLS can be given to allow fail-over.")


def add_zookeeper_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--zookeeper", help=ZOOKEEPER_HELP)


def add_wait_arguments(parser: argparse.ArgumentParser, wait_help: str) -> None:
    """Our addition to Kafka's tools: wait for the controller to finish."""
    parser.add_argument("--wait", action="store_true", help=wait_help)
    parser.add_argument("--timeout", type=float, metavar="SECONDS",
                        help="With --wait: give up after this many seconds (exit 1).")


def usage_error(parser: argparse.ArgumentParser, message: str, out) -> int:
    print(message, file=out)
    parser.print_usage(out)
    return 1


def error_message(error: BaseException) -> str:
    """The text a command prints for ``error``; ZooKeeper's connection errors have none
    of their own, so they are named.

    >>> error_message(ValueError("bad"))
    'bad'
    >>> from kafka_ha.zk.errors import ZkConnectionLost
    >>> error_message(ZkConnectionLost())
    'ZooKeeper is unavailable (ConnectionLoss)'
    """
    if isinstance(error, ZK_LOST):
        return f"ZooKeeper is unavailable ({error_text(error)})"
    return str(error)
