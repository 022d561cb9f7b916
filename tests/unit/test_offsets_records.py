"""__consumer_offsets keys and values, byte for byte as Kafka lays them out, and
the group coordinator's choice of partition."""
import struct

import pytest

from kafka_ha.coordinator import offsets_records as rec
from kafka_ha.coordinator.placement import java_string_hash_code, partition_for


def s(text):
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def b(data):
    return struct.pack(">i", len(data)) + data


def test_offset_key_is_version_1_group_topic_partition():
    assert rec.offset_key("grp", "orders", 7) == struct.pack(">h", 1) + s("grp") + s("orders") + \
        struct.pack(">i", 7)


def test_version_0_offset_keys_decode_too():
    assert rec.decode_key(struct.pack(">h", 0) + s("g") + s("t") + struct.pack(">i", 2)) == \
        rec.OffsetKey("g", "t", 2)


def test_group_key_is_version_2_group():
    assert rec.group_key("grp") == struct.pack(">h", 2) + s("grp")


def test_offset_value_v1_has_an_expire_timestamp():
    value = rec.OffsetValue(42, "meta", 1000, 2000)
    assert rec.offset_value(value) == struct.pack(">hq", 1, 42) + s("meta") + \
        struct.pack(">qq", 1000, 2000)
    assert rec.decode_offset_value(rec.offset_value(value)) == value


@pytest.mark.parametrize("version, body, expected", [
    (0, struct.pack(">q", 5) + s("m") + struct.pack(">q", 9), rec.OffsetValue(5, "m", 9)),
    (2, struct.pack(">q", 5) + s("m") + struct.pack(">q", 9), rec.OffsetValue(5, "m", 9)),
    (3, struct.pack(">qi", 5, 4) + s("m") + struct.pack(">q", 9),
     rec.OffsetValue(5, "m", 9, leader_epoch=4)),
])
def test_every_offset_value_version_decodes(version, body, expected):
    assert rec.decode_offset_value(struct.pack(">h", version) + body) == expected


def test_group_value_v2_layout():
    group = {"protocol_type": "consumer", "generation": 3, "protocol": "range", "leader": "m1",
             "current_state_timestamp": 1234, "members": [{
                 "member_id": "m1", "client_id": "c1", "client_host": "/127.0.0.1",
                 "rebalance_timeout": 300000, "session_timeout": 10000,
                 "subscription": b"\x00\x01", "assignment": b"\x02"}]}
    expected = (struct.pack(">h", 2) + s("consumer") + struct.pack(">i", 3) + s("range") + s("m1")
                + struct.pack(">q", 1234) + struct.pack(">i", 1) + s("m1") + s("c1")
                + s("/127.0.0.1") + struct.pack(">ii", 300000, 10000) + b(b"\x00\x01") + b(b"\x02"))
    assert rec.group_value(group) == expected
    assert rec.decode_group_value(expected) == group


def test_group_value_v0_members_take_the_session_timeout_as_rebalance_timeout():
    data = (struct.pack(">h", 0) + s("consumer") + struct.pack(">i", 1) + struct.pack(">h", -1)
            + struct.pack(">h", -1) + struct.pack(">i", 1) + s("m") + s("c") + s("h")
            + struct.pack(">i", 6000) + b(b"") + b(b""))
    group = rec.decode_group_value(data)
    assert group["protocol"] is None and group["current_state_timestamp"] == -1
    assert group["members"][0]["rebalance_timeout"] == 6000


def test_unknown_versions_are_refused():
    with pytest.raises(rec.UnknownRecordVersion):
        rec.decode_key(struct.pack(">h", 3) + s("g"))
    with pytest.raises(rec.UnknownRecordVersion):
        rec.decode_offset_value(struct.pack(">hq", 9, 1))


@pytest.mark.parametrize("text, expected", [
    ("", 0), ("a", 97), ("hello", 99162322), ("Aa", 2112), ("BB", 2112),
    ("polygenelubricants", -(2 ** 31)), ("é", 233), ("\U0001F600", 0xD83D * 31 + 0xDE00),
])
def test_java_string_hash_code(text, expected):
    assert java_string_hash_code(text) == expected


def test_partition_for_maps_min_value_to_zero_not_a_negative_partition():
    # Math.abs(Integer.MIN_VALUE) is negative; Kafka's Utils.abs masks it to 0.
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    # A negative hash: abs by masking, not by negation (-1 -> 0x7fffffff).
    negative = next(g for g in (f"consumer-group-{i}" for i in range(1000)) if java_string_hash_code(g) < 0)
    assert partition_for(negative, 50) == (java_string_hash_code(negative) & 0x7FFFFFFF) % 50
