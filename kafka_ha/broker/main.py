"""``kafka-server-start.sh CONFIG [--override key=value]...``: run one broker until
SIGTERM or SIGINT; SIGHUP re-reads the file's ``logger.levels``; SIGUSR1 and SIGUSR2
append stack dumps to ``stacks.log`` in the log directory (broker/stack_dumps.py).

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

from kafka_ha import cooperative  # noqa: E402
from kafka_ha.broker import gc_log, logging_setup, long_lived, stack_dumps  # noqa: E402
from kafka_ha.broker.server import KafkaServer  # noqa: E402
from kafka_ha.config import BrokerConfig, ConfigError, parse_override  # noqa: E402
from kafka_ha.protocol import primitives  # noqa: E402

log = logging.getLogger("kafka_ha.broker")

USAGE = """USAGE: kafka-server-start.sh [-daemon] server.properties|server.yaml [--override property=value]*
Option                                  Description
------                                  -----------
-daemon                                 Run in the background; output goes to
                                          $LOG_DIR/server.out
--override <property=value>             A broker property that overrides the
                                          file's value (repeatable)
-h, --help                              Print this usage and exit
Properties: docs/configuration.md; a .properties file is read as Java
properties, any other file as YAML."""


def parse_args(args: list[str]) -> tuple[str, dict[str, str]] | None:
    """``(config path, overrides)``, or None when the arguments are not usable.

    >>> parse_args(["s.properties", "--override", "broker.id=2", "--override=port=9"])
    ('s.properties', {'broker.id': '2', 'port': '9'})
    """
    path, overrides, i = None, {}, 0
    while i < len(args):
        arg = args[i]
        if arg == "--override" and i + 1 < len(args):
            key, value = parse_override(args[i + 1])
            overrides[key] = value
            i += 2
            continue
        if arg.startswith("--override="):
            key, value = parse_override(arg[len("--override="):])
            overrides[key] = value
        elif arg.startswith("-") or path is not None:
            return None
        else:
            path = arg
        i += 1
    return (path, overrides) if path else None


def main(argv: list[str] | None = None) -> int:
    if not monkey.is_module_patched("socket"):
        monkey.patch_all()  # started through the console script entry point
    long_lived.tune_collector()
    args = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in args):
        print(USAGE)
        return 0
    try:
        parsed = parse_args(args)
        if parsed is None:
            print(USAGE, file=sys.stderr)
            return 1
        path, overrides = parsed
        config = BrokerConfig.load(path, overrides)
    except (OSError, ConfigError) as e:
        print(f"Fatal error during KafkaServer startup: {e}", file=sys.stderr)
        return 1
    log_dir = logging_setup.log_dir_for(path)
    logging_setup.configure(log_dir, max_bytes=config["logger.file.max.bytes"],
                            backups=config["logger.file.backups"], levels=config["logger.levels"])
    gc_log.install()
    if config.ignored:
        # one %s per name: the flood guard cuts long arguments, and this list is long
        log.warning("Kafka properties accepted but not implemented, so ignored: "
                    + ", ".join(["%s"] * len(config.ignored)), *config.ignored)
    levels = [config["logger.levels"]]
    servers: list[KafkaServer] = []

    def reload_levels() -> None:
        try:
            fresh = BrokerConfig.load(path, overrides)["logger.levels"]
        except (OSError, ConfigError) as e:
            log.error("SIGHUP: configuration not re-read, levels unchanged: %s", e)
            return
        dynamic = getattr(servers[0], "dynamic_config", None) if servers else None
        if dynamic is not None:
            dynamic.file_levels_changed(fresh)   # a dynamic logger.levels still wins (KIP-226)
        else:
            logging_setup.apply_levels(fresh, levels[0])
        levels[0] = fresh
        log.info("SIGHUP: logger levels now %s", ",".join(f"{n}={v}" for n, v in fresh) or "defaults")
    gevent.signal_handler(signal.SIGHUP, reload_levels)
    stack_dumps.install(log_dir)     # a hung broker or controller can say where it waits
    _raise_open_files_limit()
    primitives.pause_long_arrays(cooperative.yield_on_this_thread())
    server = KafkaServer(config)
    servers.append(server)
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
