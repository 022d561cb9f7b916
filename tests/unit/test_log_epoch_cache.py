"""Leader epoch cache: KIP-101 / KIP-279 semantics, table-driven."""
import pytest

from kafka_ha.log.checkpoints import CorruptCheckpointError, LeaderEpochCheckpointFile
from kafka_ha.log.epoch_cache import LeaderEpochCache

# epochs: 1 starts at 0, 2 at 10, 4 at 25; log end offset 40
CACHE = [(1, 0), (2, 10), (4, 25)]
LEO = 40

END_OFFSET_TABLE = [
    # requested epoch -> (epoch, end offset)
    (-1, (-1, -1)),        # undefined epoch
    (0, (0, 0)),           # below every known epoch: ends where the first starts (Kafka)
    (1, (1, 10)),          # ends where the next higher epoch starts
    (2, (2, 25)),
    (3, (2, 25)),          # unknown epoch between two: largest epoch <= 3 is 2 (KIP-279)
    (4, (4, LEO)),         # the latest epoch ends at the LEO
    (5, (-1, -1)),         # newer than anything known
]


@pytest.mark.parametrize("requested,expected", END_OFFSET_TABLE)
def test_end_offset_for(requested, expected):
    assert LeaderEpochCache(entries=CACHE).end_offset_for(requested, LEO) == expected


def test_empty_cache_knows_nothing():
    cache = LeaderEpochCache()
    assert cache.latest_epoch == -1
    assert cache.end_offset_for(0, 10) == (-1, -1)


ASSIGN_TABLE = [
    # (epoch, start) -> recorded?
    ((4, 30), False),      # same epoch again (every batch of a follower carries it)
    ((3, 30), False),      # older epoch
    ((5, 20), False),      # newer epoch starting before the latest start: ignored as in Kafka < 2.4
    ((5, 25), True),       # newer epoch at the same offset (a leader change without appends)
    ((6, 40), True),
    ((-1, 40), False),
]


@pytest.mark.parametrize("entry,recorded", ASSIGN_TABLE)
def test_assign(entry, recorded):
    cache = LeaderEpochCache(entries=CACHE)
    assert cache.assign(*entry) is recorded
    assert (cache.entries()[-1] == entry) is recorded


def test_truncate_from_end():
    cache = LeaderEpochCache(entries=CACHE)
    cache.truncate_from_end(25)
    assert cache.entries() == [(1, 0), (2, 10)]
    cache.truncate_from_end(11)
    assert cache.entries() == [(1, 0), (2, 10)]
    cache.truncate_from_end(0)
    assert cache.entries() == []


@pytest.mark.parametrize("start,expected", [
    (0, CACHE),
    (5, [(1, 5), (2, 10), (4, 25)]),
    (10, [(2, 10), (4, 25)]),
    (30, [(4, 30)]),
])
def test_truncate_from_start(start, expected):
    cache = LeaderEpochCache(entries=CACHE)
    cache.truncate_from_start(start)
    assert cache.entries() == expected


def test_changes_are_checkpointed_and_reloaded(tmp_path):
    checkpoint = LeaderEpochCheckpointFile(str(tmp_path / "leader-epoch-checkpoint"))
    assert LeaderEpochCache.load(checkpoint) is None
    cache = LeaderEpochCache(checkpoint)
    cache.assign(0, 0)
    cache.assign(3, 1200)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 1200\n"
    cache.truncate_from_end(1200)
    assert LeaderEpochCache.load(checkpoint).entries() == [(0, 0)]


def test_load_rejects_non_increasing_entries(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n2\n3 100\n2 200\n")
    with pytest.raises(CorruptCheckpointError, match="not increasing"):
        LeaderEpochCache.load(LeaderEpochCheckpointFile(str(path)))


def test_start_offset_of():
    cache = LeaderEpochCache(entries=CACHE)
    assert cache.start_offset_of(2) == 10 and cache.start_offset_of(3) is None
