"""Parsing and formatting of the reassignment, preferred-election and config tools.

Pure functions, plus ``main()`` on inputs rejected before any ZooKeeper
connection (the connect string points nowhere, so reaching ZooKeeper would
fail the test with a connection error instead of the expected message).
"""
import io
import json

import pytest

from kafka_ha.admin import configs_command as cc
from kafka_ha.admin.topic_config_changes import TopicConfigError, checked_config
from kafka_ha.admin import preferred_election_command as pe
from kafka_ha.admin import reassign_command as rc
from kafka_ha.model import TopicPartition as TP
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.zk.admin_znodes import ReassignPartitionsZNode

NOWHERE = "127.0.0.1:1/nowhere"


def run(main, *argv):
    out, err = io.StringIO(), io.StringIO()
    kwargs = {"err": err} if main is not cc.main else {}
    code = main(list(argv), out=out, **kwargs)
    return code, out.getvalue(), err.getvalue()


# ---- reassignment JSON -------------------------------------------------------------


@pytest.mark.parametrize("text", [
    '{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,2,3]}]}',
    '{"partitions": [{"partition": 1, "replicas": [1, 2, 3], "topic": "foo"}], "version": 1}',
    '{"partitions":[{"replicas":[1,2,3],"topic":"foo","partition":1}]}',
    '\n{ "partitions" : [ { "topic" : "foo" , "partition" : 1 , "replicas" : [ 1 , 2 , 3 ] ,\n'
    '  "log_dirs" : [ "any" , "any" , "/d1" ] } ] }\n',
    '{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,2,3],"x":true}],"y":0}',
])
def test_reassignment_parsing_is_tolerant(text):
    assert rc.parse_reassignment(text) == [(TP("foo", 1), (1, 2, 3))]


@pytest.mark.parametrize("text", ["", "not json", "[]", '"x"', '{"version":1}',
                                  '{"partitions":null}', '{"partitions":[]}'])
def test_reassignment_without_partitions_is_empty(text):
    assert rc.parse_reassignment(text) == []
    with pytest.raises(rc.ReassignCommandError,
                       match=r"^Partition reassignment data file f\.json is empty$"):
        rc.validate_reassignment(rc.parse_reassignment(text), "f.json")


@pytest.mark.parametrize("entry, field", [
    ('"x"', r"partitions\[0\] must be an object"),
    ('{"partition":0,"replicas":[1]}', r"partitions\[0\]\.topic"),
    ('{"topic":"t","partition":"0","replicas":[1]}', r"partitions\[0\]\.partition"),
    ('{"topic":"t","partition":true,"replicas":[1]}', r"partitions\[0\]\.partition"),
    ('{"topic":"t","partition":-1,"replicas":[1]}', r"partitions\[0\]\.partition"),
    ('{"topic":"t","partition":0,"replicas":"1,2"}', r"partitions\[0\]\.replicas"),
    ('{"topic":"t","partition":0,"replicas":[1,-2]}', r"partitions\[0\]\.replicas"),
    ('{"topic":"t","partition":0,"replicas":[1,2.0]}', r"partitions\[0\]\.replicas"),
])
def test_malformed_reassignment_entries_are_named(entry, field):
    with pytest.raises(rc.ReassignCommandError, match=r"^Partition reassignment data in f is "
                                                      r"malformed: " + field):
        rc.parse_reassignment('{"partitions":[%s]}' % entry, "f")


def test_reassignment_validation_messages_are_kafkas():
    t0, t1 = TP("t", 0), TP("t", 1)
    with pytest.raises(rc.ReassignCommandError) as e:
        rc.validate_reassignment([(t0, (1,)), (t1, (2,)), (t0, (3,)), (t1, (1,)), (t0, (2,))], "f")
    assert str(e.value) == "Partition reassignment contains duplicate topic partitions: [t,0],[t,1]"
    with pytest.raises(rc.ReassignCommandError) as e:
        rc.validate_reassignment([(t0, (1, 2, 1, 2)), (t1, (3,)), (TP("u", 5), (4, 4))], "f")
    assert str(e.value) == ("Partition replica lists may not contain duplicate entries: [t,0] "
                            "contains multiple entries for 1,2. [u,5] contains multiple entries "
                            "for 4")
    with pytest.raises(rc.ReassignCommandError, match="^Partition replica list cannot be empty$"):
        rc.validate_reassignment([(t0, ())], "f")
    assert rc.validate_reassignment([(t1, (2, 1)), (t0, (1, 2))], "f") == {t1: (2, 1), t0: (1, 2)}


def test_topics_to_move_and_broker_list():
    assert rc.parse_topics_to_move('{"topics":[{"topic":"foo"},{"topic":"foo1"}],"version":1}',
                                   "f") == ["foo", "foo1"]
    assert rc.parse_topics_to_move('{"version": 1, "topics": [{"topic": "a"}, {"topic": "a"}]}',
                                   "f") == ["a", "a"]
    with pytest.raises(rc.ReassignCommandError, match="^Topics to move data file f is empty$"):
        rc.parse_topics_to_move("{}", "f")
    with pytest.raises(rc.ReassignCommandError, match="malformed"):
        rc.parse_topics_to_move('{"topics":["foo"]}', "f")
    assert rc.parse_broker_list("1,2,3") == [1, 2, 3]
    assert rc.parse_broker_list(" 3 , 1") == [3, 1]
    with pytest.raises(rc.ReassignCommandError) as e:
        rc.parse_broker_list("1,2,1,3,2")
    assert str(e.value) == "Broker list contains duplicate entries: 1,2"
    with pytest.raises(rc.ReassignCommandError, match="must be integers"):
        rc.parse_broker_list("1,b")
    with pytest.raises(rc.ReassignCommandError, match="must not be negative"):
        rc.parse_broker_list("1,-1")


def test_reassignment_json_is_the_znode_format():
    text = rc.reassignment_json({TP("b", 1): (3, 1), TP("a", 0): (1, 2)})
    assert text == ('{"version":1,"partitions":[{"topic":"b","partition":1,"replicas":[3,1]},'
                    '{"topic":"a","partition":0,"replicas":[1,2]}]}')
    # What --generate and --execute print is a valid --reassignment-json-file.
    assert rc.parse_reassignment(text) == [(TP("b", 1), (3, 1)), (TP("a", 0), (1, 2))]
    assert rc.reassignment_json({}) == '{"version":1,"partitions":[]}'
    request = {TP("t", 0): (4, 5, 6), TP("u", 3): (1,)}
    assert rc.reassignment_json(request).encode() == ReassignPartitionsZNode.encode(request)
    # Skipped requests are still echoed, even names that cannot be znodes.
    assert rc.reassignment_json({TP("a/b", 0): (1,)}) == \
        '{"version":1,"partitions":[{"topic":"a/b","partition":0,"replicas":[1]}]}'


def test_verify_statuses_and_report():
    a, b, c, d = TP("t", 0), TP("t", 1), TP("t", 2), TP("gone", 0)
    requested = {a: (2, 3), b: (2, 1), c: (1, 2), d: (1,)}
    pending = {a: (2, 3)}
    assigned = {a: (1, 2), b: (2, 1), c: (2, 1)}
    statuses = rc.reassignment_statuses(requested, pending, assigned)
    assert statuses == [(a, rc.IN_PROGRESS), (b, rc.COMPLETED), (c, rc.FAILED), (d, rc.FAILED)]
    assert rc.verify_report(requested, statuses, assigned) == [
        "Status of partition reassignment:",
        "ERROR: Assigned replicas (2,1) don't match the list of replicas for reassignment (1,2) "
        "for partition [t,2]",
        "ERROR: Assigned replicas () don't match the list of replicas for reassignment (1) "
        "for partition [gone,0]",
        "Reassignment of partition [t,0] is still in progress",
        "Reassignment of partition [t,1] completed successfully",
        "Reassignment of partition [t,2] failed",
        "Reassignment of partition [gone,0] failed",
    ]
    assert rc.reassignment_statuses({a: (2, 3)}, None, {a: (2, 3)}) == [(a, rc.COMPLETED)]


def test_duplicates_keep_first_repeat_order():
    assert rc.duplicates("abcba") == ["b", "a"]
    assert rc.duplicates([1, 2, 3]) == []


# ---- reassignment main() before ZooKeeper -----------------------------------------


@pytest.mark.parametrize("argv, message", [
    ([], "Command must include exactly one action: --generate, --execute or --verify"),
    (["--zookeeper", NOWHERE, "--execute", "--verify"],
     "Command must include exactly one action: --generate, --execute or --verify"),
    (["--execute", "--reassignment-json-file", "f"], 'Missing required argument "[zookeeper]"'),
    (["--zookeeper", NOWHERE, "--generate", "--broker-list", "1"],
     "If --generate option is used, command must include both --topics-to-move-json-file and "
     "--broker-list options"),
    (["--zookeeper", NOWHERE, "--execute"],
     "If --execute option is used, command must include --reassignment-json-file that was "
     "output during the --generate option"),
    (["--zookeeper", NOWHERE, "--verify"],
     "If --verify option is used, command must include --reassignment-json-file that was used "
     "during the --execute option"),
    (["--zookeeper", NOWHERE, "--execute", "--reassignment-json-file", "f", "--wait"],
     "--wait can only be used with --verify"),
])
def test_reassign_usage_errors(argv, message):
    code, out, _ = run(rc.main, *argv)
    assert code == 1
    assert out.splitlines()[0] == message
    assert "usage: kafka-reassign-partitions.sh" in out


def test_reassign_input_errors_come_before_connecting(tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}))
    code, out, _ = run(rc.main, "--zookeeper", NOWHERE, "--execute",
                       "--reassignment-json-file", str(f))
    assert (code, out) == (1, "Partitions reassignment failed due to Partition replica lists may "
                              "not contain duplicate entries: [t,0] contains multiple entries "
                              "for 1\n")
    f.write_text("")
    code, out, _ = run(rc.main, "--zookeeper", NOWHERE, "--execute",
                       "--reassignment-json-file", str(f))
    assert (code, out) == (1, f"Partitions reassignment failed due to Partition reassignment data "
                              f"file {f} is empty\n")
    missing = tmp_path / "missing.json"
    code, out, _ = run(rc.main, "--zookeeper", NOWHERE, "--verify",
                       "--reassignment-json-file", str(missing))
    assert (code, out) == (1, f"Partitions reassignment failed due to {missing} (No such file or "
                              f"directory)\n")
    f.write_text('{"topics":[{"topic":"a"},{"topic":"b"},{"topic":"a"}]}')
    code, out, _ = run(rc.main, "--zookeeper", NOWHERE, "--generate", "--broker-list", "1,2",
                       "--topics-to-move-json-file", str(f))
    assert (code, out) == (1, "Partitions reassignment failed due to List of topics to reassign "
                              "contains duplicate entries: a\n")
    code, out, _ = run(rc.main, "--zookeeper", NOWHERE, "--generate", "--broker-list", "1,1",
                       "--topics-to-move-json-file", str(missing))
    assert (code, out) == (1, "Partitions reassignment failed due to Broker list contains "
                              "duplicate entries: 1\n"), "the broker list is checked first"


# ---- preferred replica election ------------------------------------------------------


def test_election_data_parsing():
    assert pe.parse_election_data(
        '{"partitions":\n\t[{"topic": "foo", "partition": 1},\n\t {"topic": "foobar", '
        '"partition": 2}]\n}') == [TP("foo", 1), TP("foobar", 2)]
    assert pe.parse_election_data('{"partitions":[{"partition":0,"topic":"a"}],"version":1}') \
        == [TP("a", 0)]
    for text in ("", "nope", "[]", "{}", '{"version":1}'):
        with pytest.raises(pe.ElectionCommandError,
                           match="^Preferred replica election data is empty$"):
            pe.parse_election_data(text)
    with pytest.raises(pe.ElectionCommandError) as e:
        pe.parse_election_data('{"partitions":[{"topic":"a","partition":0},'
                               '{"topic":"b","partition":1},{"topic":"a","partition":0},'
                               '{"topic":"b","partition":1}]}')
    assert str(e.value) == ("Preferred replica election data contains duplicate partitions: "
                            "[a,0],[b,1]")
    for entry in ('{"topic":"a"}', '{"topic":"a","partition":"0"}', '{"partition":0}', '3'):
        with pytest.raises(pe.ElectionCommandError, match=r"malformed: partitions\[0\]"):
            pe.parse_election_data('{"partitions":[%s]}' % entry)


def test_election_set_format():
    assert pe.scala_set([TP("foo", 1), TP("foobar", 2)]) == "Set([foo,1], [foobar,2])"
    assert pe.scala_set([]) == "Set()"


def test_election_main_errors_before_connecting(tmp_path):
    code, out, _ = run(pe.main)
    assert code == 1 and out.startswith(pe.ABOUT + "\n")
    code, out, _ = run(pe.main, "--path-to-json-file", "x")
    assert code == 1 and out.startswith('Missing required argument "[zookeeper]"\n')
    f = tmp_path / "e.json"
    f.write_text('{"partitions":[{"topic":"a","partition":0},{"topic":"a","partition":0}]}')
    code, out, _ = run(pe.main, "--zookeeper", NOWHERE, "--path-to-json-file", str(f))
    assert (code, out) == (1, "Failed to start preferred replica election\nPreferred replica "
                              "election data contains duplicate partitions: [a,0]\n")


# ---- configs ----------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("retention.ms=1000", {"retention.ms": "1000"}),
    ("k1=v1,k2=[a,b],k3=v3", {"k1": "v1", "k2": "a,b", "k3": "v3"}),
    (" k1 = v1 , k2=[ a, b ] ", {"k1": "v1", "k2": "a, b"}),
    ("k2=[a,b,c]", {"k2": "a,b,c"}),
    ("k=v,", {"k": "v"}),  # Java's split drops trailing empty strings
    ("k=", None), ("k", None), ("=v", {"": "v"}), ("a=b=c", None), (",k=v", None), ("", None),
    ("k=[a=b]", {"k": "a=b"}),
])
def test_add_config_parsing(text, expected):
    if expected is None:
        with pytest.raises(cc.ConfigCommandError) as e:
            cc.parse_add_config(text)
        assert str(e.value) == ('requirement failed: Invalid entity config: all configs to be '
                                'added must be in the format "key=val".')
    else:
        assert cc.parse_add_config(text) == expected


def test_delete_config_and_merge():
    assert cc.parse_delete_config(["a,b", " c ", "d,,"]) == ["a", "b", "c", "d"]
    current = {"retention.ms": "1", "flush.ms": "2"}
    assert cc.altered_config(current, {"retention.ms": "5", "cleanup.policy": "delete"},
                             ["flush.ms"]) == {"retention.ms": "5", "cleanup.policy": "delete"}
    assert current == {"retention.ms": "1", "flush.ms": "2"}, "the input is not modified"
    with pytest.raises(cc.ConfigCommandError, match=r"^Invalid config\(s\): a,b$"):
        cc.altered_config(current, {}, ["a", "flush.ms", "b"])
    # The merged result is validated on the path the command shares with AlterConfigs.
    with pytest.raises(TopicConfigError, match=r'^requirement failed: Unknown configuration "nope"\.$'):
        checked_config(cc.altered_config({}, {"nope": "1"}, []))
    with pytest.raises(TopicConfigError, match="retention.ms") as refused:
        checked_config(cc.altered_config({}, {"retention.ms": "soon"}, []))
    assert refused.value.code == ErrorCode.INVALID_CONFIG
    with pytest.raises(TopicConfigError, match=r"^Invalid value compact,forever for configuration "
                                               r"cleanup.policy: String must be one of: compact, delete"):
        checked_config(cc.altered_config({}, {"cleanup.policy": "compact,forever"}, []))


def test_describe_line():
    assert cc.describe_line("foo", {"k1": "v1", "k2": "v2"}) == \
        "Configs for topic 'foo' are k1=v1,k2=v2"
    assert cc.describe_line("foo", {}) == "Configs for topic 'foo' are "


@pytest.mark.parametrize("argv, message", [
    (["--zookeeper", NOWHERE, "--entity-type", "topics"],
     "Command must include exactly one action: --describe, --alter"),
    (["--describe", "--entity-type", "topics"],
     "Only one of --bootstrap-server or --zookeeper must be specified"),
    (["--zookeeper", NOWHERE, "--bootstrap-server", "localhost:1", "--describe", "--entity-type",
      "topics"], "Only one of --bootstrap-server or --zookeeper must be specified"),
    (["--zookeeper", NOWHERE, "--describe"], 'Missing required argument "[entity-type]"'),
    (["--zookeeper", NOWHERE, "--describe", "--entity-type", "topics", "--add-config", "a=b"],
     'Option "[describe]" can\'t be used with option"[add-config]"'),
    (["--zookeeper", NOWHERE, "--describe", "--entity-type", "topic"],
     "Invalid entity-type topic, --entity-type must be one of List(topics, clients, users, "
     "brokers)"),
    (["--zookeeper", NOWHERE, "--describe", "--entity-type", "users"],
     "Unsupported entity-type users: kafka-ha keeps configs for topics and brokers only"),
    (["--zookeeper", NOWHERE, "--alter", "--entity-type", "topics", "--add-config", "a=b"],
     "--entity-name or --entity-default must be specified with --alter of topics"),
    (["--zookeeper", NOWHERE, "--alter", "--entity-type", "brokers", "--entity-name", "x",
      "--add-config", "a=b"],
     "The entity name for brokers must be a valid integer broker id, found: x"),
    (["--zookeeper", NOWHERE, "--alter", "--entity-type", "topics", "--entity-default",
      "--add-config", "a=b"], "--entity-default is not supported for topics"),
    (["--zookeeper", NOWHERE, "--alter", "--entity-type", "topics", "--entity-name", "t"],
     "At least one of --add-config or --delete-config must be specified with --alter"),
])
def test_configs_usage_errors(argv, message):
    code, out, _ = run(cc.main, *argv)
    assert code == 1
    assert out.splitlines()[0] == message
    assert "usage: kafka-configs.sh" in out
