"""CreateTopics, DeleteTopics and CreatePartitions, served by the active controller.

As in Kafka 2.x, any broker takes these requests but only the controller acts on
them; the others answer NOT_CONTROLLER per topic, and clients look the
controller up in Metadata and send again.  The controller applies them through
the code paths ``kafka-topics.sh --zookeeper`` uses: :mod:`kafka_ha.admin.topic_plans`
decides (the same checks, the same messages), :class:`~kafka_ha.admin.zk_admin.ZkAdmin`
writes the topic, partition or deletion intent through the admin store, on the
broker's own ZooKeeper session, and the controller's watches do the rest as
they would for the script.

Then, as Kafka does, the answer waits (up to the request's ``timeout_ms``) until
the work shows in this broker's metadata cache: every partition of a new topic
has a leader, a deleted topic is gone.  What is not there by then gets
REQUEST_TIMED_OUT; the topic stays, as the write did happen.  ``timeout_ms <= 0``
answers REQUEST_TIMED_OUT without waiting; ``validate_only`` answers without
writing or waiting.  The ZooKeeper calls and the waiting yield to the event loop
(the broker's kazoo client uses gevent), and any failure of one entry becomes
that entry's error, never the broker's.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

from gevent.pool import Pool

from kafka_ha.admin.topic_plans import checked_configs, plan_added_partitions, plan_new_topic
from kafka_ha.admin.zk_admin import ZkAdmin
from kafka_ha.broker import topic_admin_decisions as d
from kafka_ha.broker.metadata_cache import MetadataCache
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.api import ApiKey
from kafka_ha.protocol.errors import ErrorCode
from kafka_ha.zk.errors import ZkBadVersion, ZkNodeExists

log = logging.getLogger(__name__)
# The waits wake at each UpdateMetadata; this bound only covers an update missed
# between a check and the wait.
WAIT_POLL_S = 0.5
CREATE_CONCURRENCY = 16      # topics of one CreateTopics written at once
ADD_PARTITION_ATTEMPTS = 3   # a concurrent assignment change makes us read and plan again


class TopicAdminApis:
    def __init__(self, admin: ZkAdmin, metadata: MetadataCache, is_controller: Callable[[], bool],
                 delete_enabled: bool, sleep: Callable[[float], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``sleep(seconds)`` waits for the metadata to change (default: the cache's
        :meth:`~MetadataCache.wait_for_update`)."""
        self.admin = admin
        self.metadata = metadata
        self.is_controller = is_controller
        self.delete_enabled = delete_enabled
        self._sleep, self._clock = sleep or metadata.wait_for_update, clock

    # ---- CreateTopics -------------------------------------------------------------

    def create_topics(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        entries = body["topics"]
        validate_only = body.get("validate_only", False)
        results: dict[str, d.Result] = {}
        refused = self._refuse_all()
        twice = d.named_twice(e["name"] for e in entries)
        pending = []
        for entry in entries:
            name = entry["name"]
            if refused or name in twice:
                results[name] = refused or (ErrorCode.INVALID_REQUEST,
                                            f"Create topics request contains multiple entries "
                                            f"for the topic {name}")
            else:
                results[name] = d.NO_ERROR   # keeps the request's order; replaced below
                pending.append(entry)
        if pending:
            brokers: list[int] | None = None
            failure: Exception | None = None
            try:
                brokers = self.admin.store.live_broker_racks()   # rack-aware when racks are set
            except Exception as e:
                failure = e

            def create(entry: dict[str, Any]) -> None:
                name = entry["name"]
                try:
                    if failure is not None:
                        raise failure
                    self._create(entry, brokers, validate_only)
                except Exception as e:  # one entry's failure is its answer, never the broker's
                    results[name] = self._refused(e, "create topic", name)
            # Each creation is a few ZooKeeper round trips; topics are independent (the
            # create multi settles races on a name), so a batch overlaps them.
            Pool(CREATE_CONCURRENCY).map(create, pending)
        if not validate_only:
            created = [n for n, (code, _) in results.items() if code == ErrorCode.NONE]
            self._wait(results, created, body["timeout_ms"], self._has_leaders)
        return d.create_topics_response(results, version)

    def _create(self, entry: dict[str, Any], brokers: list[int], validate_only: bool) -> None:
        name = entry["name"]
        partitions, rf, assignment, configs = d.creation_request(entry)
        replicas = plan_new_topic(name, partitions, rf, assignment, brokers,
                                  known_brokers=set(brokers))
        configs = checked_configs(configs)
        if validate_only:
            if self.admin.store.topic_exists(name) or self.admin.store.marked_for_deletion(name):
                raise d.TopicExists(f"Topic '{name}' already exists.")
            return
        try:
            self.admin.create_topic(name, replicas, configs)
        except ZkNodeExists:
            raise d.TopicExists(f"Topic '{name}' already exists.") from None
        except ValueError as e:   # marked for deletion: Kafka says the topic exists
            raise d.TopicExists(str(e)) from None

    def _has_leaders(self, topic: str) -> bool:
        assignment_known = self.metadata.partitions.get(topic)
        return bool(assignment_known) and all(s.leader >= 0 for s in assignment_known.values())

    # ---- DeleteTopics -------------------------------------------------------------

    def delete_topics(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        names = body["topic_names"]
        refused = self._refuse_all() or d.deletion_refusal(self.delete_enabled, version)
        results: dict[str, d.Result] = {}
        for name in names:
            if refused:
                results[name] = refused
                continue
            try:
                if not self.admin.store.topic_exists(name):
                    raise d.UnknownTopic(f"Topic '{name}' does not exist.")
                try:
                    self.admin.store.create_deletion_marker(name)
                except ZkNodeExists:
                    pass   # already marked: wait for the deletion like the first caller
                results[name] = d.NO_ERROR
            except Exception as e:
                results[name] = self._refused(e, "delete topic", name)
        deleting = [n for n, (code, _) in results.items() if code == ErrorCode.NONE]
        self._wait(results, deleting, body["timeout_ms"], lambda t: t not in self.metadata.partitions)
        return d.delete_topics_response(results, version)

    # ---- CreatePartitions ---------------------------------------------------------

    def create_partitions(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        entries = body["topics"]
        refused = self._refuse_all()
        twice = d.named_twice(e["name"] for e in entries)
        results: dict[str, d.Result] = {}
        for entry in entries:
            name = entry["name"]
            if refused or name in twice:
                results[name] = refused or (ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
                continue
            try:
                self._add_partitions(entry, body["validate_only"])
                results[name] = d.NO_ERROR
            except Exception as e:
                results[name] = self._refused(e, "add partitions to", name)
        if not body["validate_only"]:
            counts = {e["name"]: e["count"] for e in entries}
            grown = [n for n, (code, _) in results.items() if code == ErrorCode.NONE]
            self._wait(results, grown, body["timeout_ms"],
                       lambda t: all((s := self.metadata.partition(TopicPartition(t, p))) is not None
                                     and s.leader >= 0 for p in range(counts[t])))
        return d.create_partitions_response(results, version)

    def _add_partitions(self, entry: dict[str, Any], validate_only: bool) -> None:
        name = entry["name"]
        listed = entry["assignments"]
        listed = None if listed is None else [tuple(a["broker_ids"]) for a in listed]
        for attempt in range(ADD_PARTITION_ATTEMPTS):
            current = self.admin.store.assignment(name)
            if current is None:
                raise d.UnknownTopic(f"The topic '{name}' does not exist.")
            if self.admin.store.marked_for_deletion(name):
                raise d.UnknownTopic(f"The topic '{name}' is queued for deletion.")
            brokers = self.admin.store.live_broker_racks()
            new = plan_added_partitions(current, entry["count"], listed, brokers, set(brokers))
            if validate_only:
                return
            try:
                self.admin.add_partitions(current, new)
                return
            except ZkBadVersion:
                if attempt == ADD_PARTITION_ATTEMPTS - 1:
                    raise

    # ---- shared -------------------------------------------------------------------

    def _refuse_all(self) -> d.Result | None:
        if self.is_controller():
            return None
        return ErrorCode.NOT_CONTROLLER, d.NOT_CONTROLLER_MESSAGE

    def _refused(self, error: Exception, what: str, topic: str) -> d.Result:
        result = d.refusal(error)
        if result[0] == ErrorCode.UNKNOWN_SERVER_ERROR:
            log.warning("Could not %s %s", what, topic, exc_info=True)
        else:
            log.info("Refused to %s %s: %s", what, topic, result[1])
        return result

    def _wait(self, results: dict[str, d.Result], topics: list[str], timeout_ms: int,
              done: Callable[[str], bool]) -> None:
        """Wait until ``done`` holds for each of ``topics`` or ``timeout_ms`` passes; the
        ones left over get REQUEST_TIMED_OUT."""
        deadline = self._clock() + timeout_ms / 1000
        waiting = list(topics)
        while waiting and timeout_ms > 0:
            waiting = [t for t in waiting if not done(t)]
            now = self._clock()
            if not waiting or now >= deadline:
                break
            self._sleep(min(WAIT_POLL_S, deadline - now))
        for topic in waiting:
            results[topic] = (ErrorCode.REQUEST_TIMED_OUT,
                              f"The request timed out after {timeout_ms} ms; the operation on "
                              f"{topic} goes on in the background.")

    def handlers(self) -> dict[ApiKey, Callable[[dict[str, Any], int], dict[str, Any]]]:
        """``{api key: handler(body, version)}`` for :class:`~kafka_ha.broker.kafka_apis.KafkaApis`."""
        return {ApiKey.CREATE_TOPICS: self.create_topics, ApiKey.DELETE_TOPICS: self.delete_topics,
                ApiKey.CREATE_PARTITIONS: self.create_partitions}
