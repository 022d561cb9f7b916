"""One consumer group member as its own process, with an unmodified client from PyPI.

    python -m tests.harness.group_member CLIENT BOOTSTRAP GROUP TOPIC

CLIENT is kafka-python, confluent-kafka or aiokafka.  The member consumes,
commits synchronously after every batch it read (at least once), and prints one
JSON line per event on stdout, flushed at once so that a kill -9 loses nothing
printed: ``{"assigned": [partitions]}`` when its assignment changes,
``{"records": [[partition, offset, value], ...]}`` for each batch, then
``{"committed": {partition: next offset}}`` once that batch's commit succeeded.
SIGTERM closes it cleanly (it leaves the group).
"""
import asyncio
import json
import signal
import sys

SESSION_MS = 6000
HEARTBEAT_MS = 500
stopping = False


def emit(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _stop(*_):
    global stopping
    stopping = True


class Reporter:
    def __init__(self):
        self.assigned = None

    def assignment(self, partitions):
        partitions = sorted(partitions)
        if partitions != self.assigned:
            self.assigned = partitions
            emit(assigned=partitions)

    def batch(self, records):
        """records: (partition, offset, value bytes); returns the offsets to commit."""
        if not records:
            return {}
        emit(records=[[p, o, v.decode()] for p, o, v in records])
        positions = {}
        for p, o, _ in records:
            positions[p] = max(positions.get(p, 0), o + 1)
        return positions


def run_kafka_python(bootstrap, group, topic, reporter):
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             client_id="kafka-python-member", auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=SESSION_MS,
                             heartbeat_interval_ms=HEARTBEAT_MS, fetch_max_wait_ms=200)
    while not stopping:
        polled = consumer.poll(timeout_ms=300)
        reporter.assignment(tp.partition for tp in consumer.assignment())
        records = [(r.partition, r.offset, r.value) for rs in polled.values() for r in rs]
        commit = reporter.batch(records)
        if commit:
            try:
                consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                                 for p, o in commit.items()})
                emit(committed=commit)
            except Exception as e:   # a rebalance in between: the next owner re-reads
                emit(commit_failed=repr(e))
    consumer.close()


def run_confluent(bootstrap, group, topic, reporter):
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "client.id": "confluent-member", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": SESSION_MS,
                         "heartbeat.interval.ms": HEARTBEAT_MS, "fetch.wait.max.ms": 200})
    consumer.subscribe([topic])
    while not stopping:
        messages = consumer.consume(num_messages=500, timeout=0.3)
        reporter.assignment(tp.partition for tp in consumer.assignment())
        records = [(m.partition(), m.offset(), m.value()) for m in messages if m.error() is None]
        commit = reporter.batch(records)
        if commit:
            try:
                consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in commit.items()],
                                asynchronous=False)
                emit(committed=commit)
            except KafkaException as e:
                emit(commit_failed=repr(e))
    consumer.close()


def run_aiokafka(bootstrap, group, topic, reporter):
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.structs import OffsetAndMetadata

    async def main():
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                    client_id="aiokafka-member", auto_offset_reset="earliest",
                                    enable_auto_commit=False, session_timeout_ms=SESSION_MS,
                                    heartbeat_interval_ms=HEARTBEAT_MS, fetch_max_wait_ms=200)
        await consumer.start()
        try:
            while not stopping:
                polled = await consumer.getmany(timeout_ms=300)
                reporter.assignment(tp.partition for tp in consumer.assignment())
                records = [(r.partition, r.offset, r.value) for rs in polled.values() for r in rs]
                commit = reporter.batch(records)
                if commit:
                    try:
                        await consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "")
                                               for p, o in commit.items()})
                        emit(committed=commit)
                    except Exception as e:
                        emit(commit_failed=repr(e))
        finally:
            await consumer.stop()
    asyncio.run(main())


CLIENTS = {"kafka-python": run_kafka_python, "confluent-kafka": run_confluent,
           "aiokafka": run_aiokafka}



class MemberProcess:
    """A member started from a test; its events collected on a thread as they come."""

    def __init__(self, client, bootstrap, group, topic, log_path):
        import os
        import subprocess
        import threading
        from pathlib import Path
        root = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": str(root)}
        self.client = client
        self.events = []
        self._stderr = open(log_path, "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.harness.group_member", client,
                                      bootstrap, group, topic], cwd=root, env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=self._stderr,
                                     stdin=subprocess.DEVNULL)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.events.append(json.loads(line))
            except ValueError:
                pass

    @property
    def assigned(self):
        """The latest assignment it reported (None before its first)."""
        found = [e["assigned"] for e in list(self.events) if "assigned" in e]
        return set(found[-1]) if found else None

    def records(self):
        return [tuple(r) for e in list(self.events) if "records" in e for r in e["records"]]

    def commits(self):
        return [{int(p): o for p, o in e["committed"].items()}
                for e in list(self.events) if "committed" in e]

    def kill(self):
        self.proc.kill()
        self.proc.wait(timeout=30)
        self._reader.join(timeout=10)

    def stop(self, timeout_s=60):
        self.proc.terminate()
        self.proc.wait(timeout=timeout_s)
        self._reader.join(timeout=10)
        self._stderr.close()


if __name__ == "__main__":
    client, bootstrap, group, topic = sys.argv[1:5]
    signal.signal(signal.SIGTERM, _stop)
    CLIENTS[client](bootstrap, group, topic, Reporter())
    emit(closed=True)
