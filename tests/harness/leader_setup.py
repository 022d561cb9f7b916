"""What the leader-side unit tests share: a leader Partition over a real Log, and ISR writers
that record or refuse what the partition asks of them instead of writing to ZooKeeper."""
from kafka_ha.broker.partition import Partition
from kafka_ha.log import Log, LogConfig
from kafka_ha.model import PartitionStateInfo, TopicPartition
from kafka_ha.records import Record, build_v2_batch

TP = TopicPartition("t", 0)
LEADER = 1


class RecordingIsrWriter:
    """Records the ISR changes a partition asks for; none of them is carried out."""

    def __init__(self):
        self.expansions = []   # (new_isr, reason)
        self.removals = []     # (leaving, reason)

    def spawn_change(self, partition, new_isr, reason, on_done=None):
        self.expansions.append((tuple(new_isr), reason))

    def change(self, partition, new_isr, reason):
        self.expansions.append((tuple(new_isr), reason))
        return False

    def remove(self, partition, leaving, reason):
        self.removals.append((list(leaving), reason))
        return False


class NoIsrChanges:
    """An ISR writer for scenarios whose ISR must stay as it is: any change fails the test."""

    def spawn_change(self, *args, **kwargs):
        raise AssertionError("the ISR must not change here")

    change = remove = spawn_change


def state(isr, epoch=1, replicas=(1, 2, 3), leader=LEADER, zk_version=0, tp=TP):
    return PartitionStateInfo(tp, 1, leader, epoch, tuple(isr), zk_version, tuple(replicas))


def open_log(tmp_path, tp=TP):
    return Log(str(tmp_path / f"{tp.topic}-{tp.partition}"), tp, LogConfig())


def leader(log_, isr, min_isr=1, writer=None, epoch=1, replicas=(1, 2, 3)):
    """Broker 1's Partition of ``log_``, leading ``isr`` at ``epoch``."""
    p = Partition(log_.tp, LEADER, log_, lambda: min_isr, writer or RecordingIsrWriter())
    p.make_leader(state(isr, epoch, replicas, tp=log_.tp))
    return p


def batch(*values):
    return build_v2_batch([Record(None, v) for v in values or (b"v",)])
