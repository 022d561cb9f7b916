"""server.properties (Java properties), Kafka's known-but-ignored keys, --override,
and the broker's rotating, levelled logs."""
import logging

import pytest

from kafka_ha import java_properties
from kafka_ha.broker import logging_setup
from kafka_ha.broker.main import parse_args
from kafka_ha.config import KEYS, BrokerConfig, ConfigError
from kafka_ha.config_kafka_keys import KAFKA_BROKER_KEYS


def test_java_properties_syntax():
    text = ("# comment\n! also a comment\n  \n"
            "a=1\nb : 2\nc   3\n"
            "long = one,\\\n      two\n"
            "esc\\ key=tab\\there\n"
            "uni=\\u00e9\n"
            "empty=\n"
            "a=later wins\n"
            "trail=x\\\\\n")
    assert java_properties.parse(text) == {
        "a": "later wins", "b": "2", "c": "3", "long": "one,two", "esc key": "tab\there",
        "uni": "\u00e9", "empty": "", "trail": "x\\"}


def _write(tmp_path, text, name="server.properties"):
    path = tmp_path / name
    path.write_text(text)
    return path


BASE = "broker.id=3\nzookeeper.connect=127.0.0.1:2181\nlog.dirs=/a, /b\n"


def test_properties_are_typed_and_kafka_keys_are_ignored_once(tmp_path):
    cfg = BrokerConfig.load(_write(tmp_path, BASE + "num.network.threads=3\n"
                                   "num.io.threads=8\nauto.create.topics.enable=false\n"
                                   "log.retention.hours=24\nlogger.levels=kafka.controller=DEBUG\n"))
    assert cfg.broker_id == 3 and cfg.log_dirs == ("/a", "/b")
    assert cfg["auto.create.topics.enable"] is False and cfg["log.retention.hours"] == 24
    assert cfg.ignored == ("num.io.threads", "num.network.threads")
    assert cfg["logger.levels"] == (("kafka.controller", "DEBUG"),)


def test_typo_is_an_error_with_a_suggestion(tmp_path):
    with pytest.raises(ConfigError, match="unknown configuration key 'num.netwrok.threads'.*"
                                          "did you mean 'num.network.threads'"):
        BrokerConfig.load(_write(tmp_path, BASE + "num.netwrok.threads=3\n"))


def test_bad_value_names_the_key(tmp_path):
    with pytest.raises(ConfigError, match="invalid value for log.retention.hours"):
        BrokerConfig.load(_write(tmp_path, BASE + "log.retention.hours=a week\n"))


def test_overrides_win_and_yaml_still_loads(tmp_path):
    path = _write(tmp_path, "broker.id: 1\nzookeeper.connect: z:2181\n", "server.yaml")
    cfg = BrokerConfig.load(path, {"broker.id": "7", "num.network.threads": "5"})
    assert cfg.broker_id == 7 and cfg.ignored == ("num.network.threads",)


def test_every_implemented_key_except_ours_is_a_kafka_key():
    ours = {k.name for k in KEYS} - KAFKA_BROKER_KEYS
    assert ours == {"socket.request.read.timeout.ms", "logger.file.max.bytes",
                    "logger.file.backups", "logger.levels", "metrics.port",
                    # Kafka 2.x checks every 10 minutes without a key (3.x has this one)
                    "producer.id.expiration.check.interval.ms"}


def test_server_start_arguments():
    assert parse_args(["s.yaml"]) == ("s.yaml", {})
    assert parse_args(["a", "b"]) is None and parse_args([]) is None
    with pytest.raises(ConfigError):
        parse_args(["s.yaml", "--override", "novalue"])


def test_files_rotate_and_keep_at_most_the_configured_backups(tmp_path, clean_logging):
    logging_setup.configure(tmp_path, max_bytes=2048, backups=2)
    controller = logging.getLogger("kafka_ha.controller")
    for i in range(400):   # ~40 KB through controller.log and server.log
        controller.info("controller event %d %s", i, "x" * 60)
    for base in ("server.log", "controller.log"):
        files = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(base))
        assert files == [base, f"{base}.1", f"{base}.2"]
        assert all((tmp_path / f).stat().st_size <= 2048 + 200 for f in files)


def test_levels_by_kafka_logger_name_and_reload(tmp_path, clean_logging):
    logging_setup.configure(tmp_path, levels=(("kafka.controller", "DEBUG"),
                                              ("state.change.logger", "TRACE")))
    assert logging.getLogger("kafka_ha.controller").level == logging.DEBUG
    assert logging.getLogger("state.change").level == logging_setup.TRACE
    logging_setup.apply_levels((("kafka", "WARN"),), (("kafka.controller", "DEBUG"),
                                                      ("state.change.logger", "TRACE")))
    assert logging.getLogger("kafka_ha.controller").level == logging.NOTSET
    assert logging.getLogger("kafka_ha.controller").getEffectiveLevel() == logging.WARNING


def test_example_server_properties_loads():
    from pathlib import Path
    cfg = BrokerConfig.load(Path(__file__).resolve().parents[2] / "conf" / "server.properties")
    assert cfg.broker_id == 1 and cfg["min.insync.replicas"] == 2
    assert cfg.ignored == ("num.io.threads", "num.network.threads")
