"""``kafka-server-start.sh CONFIG``: run one broker until SIGTERM or SIGINT.

The broker runs on gevent with the standard library monkey-patched.  That
happens only when this module runs as the program (before anything else is
imported), never on import: a test process that imports it must keep its
real threads.
"""
from __future__ import annotations

if __name__ == "__main__":
    from gevent import monkey
    monkey.patch_all()

import logging  # noqa: E402  (after monkey-patching, as gevent requires)
import resource  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402

import gevent  # noqa: E402
from gevent import monkey  # noqa: E402

from kafka_ha.broker import logging_setup  # noqa: E402
from kafka_ha.broker.server import KafkaServer  # noqa: E402
from kafka_ha.config import BrokerConfig, ConfigError  # noqa: E402

log = logging.getLogger("kafka_ha.broker")


def main(argv: list[str] | None = None) -> int:
    if not monkey.is_module_patched("socket"):
        monkey.patch_all()  # started through the console script entry point
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print("USAGE: kafka-server-start.sh [-daemon] server.yaml", file=sys.stderr)
        return 1
    try:
        config = BrokerConfig.load(args[0])
    except (OSError, ConfigError) as e:
        print(f"Fatal error during KafkaServer startup: {e}", file=sys.stderr)
        return 1
    logging_setup.configure(logging_setup.log_dir_for(args[0]))
    _raise_open_files_limit()
    server = KafkaServer(config)
    try:
        server.startup()
    except Exception as e:
        log.exception("Fatal error during KafkaServer startup. Prepare to shutdown")
        print(f"Fatal error during KafkaServer startup: {e}", file=sys.stderr)
        server.shutdown()
        return 1
    for sig in (signal.SIGTERM, signal.SIGINT):
        gevent.signal_handler(sig, server.request_shutdown)
    server.await_shutdown()
    return 0


def _raise_open_files_limit() -> None:
    """Every partition keeps its active segment and index open, as Kafka does (and Kafka's
    docs ask for a high ``ulimit -n``): raise the soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    log.info("Open files limit: %d", max(soft, hard))


if __name__ == "__main__":
    sys.exit(main())
