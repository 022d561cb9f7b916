"""The controller: election, failover, and the handlers of broker and topic changes.

Every broker runs one of these; the one that wins ``/controller`` is active.
All handlers run on the event loop's single greenlet.  ZooKeeper watch
callbacks only enqueue an event; handlers re-read ZooKeeper and re-arm the
watch in the same call.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

import gevent
from gevent.event import AsyncResult

from kazoo.client import KazooClient
from kazoo.exceptions import SessionExpiredError
from kazoo.protocol.states import KazooState

from kafka_ha.config import BrokerConfig, topic_setting
from kafka_ha.controller import election, events as ev
from kafka_ha.controller.channel import ControllerChannel
from kafka_ha.controller.context import ControllerContext
from kafka_ha.controller.controlled_shutdown import ControlledShutdown
from kafka_ha.controller.event_loop import EventLoop
from kafka_ha.controller.leader_balancing import LeaderBalancing
from kafka_ha.controller.partition_state_machine import PartitionStateMachine
from kafka_ha.controller.reassignment import Reassignment
from kafka_ha.controller.request_batch import RequestBatch
from kafka_ha.controller.topic_deletion import TopicDeletion, state_during_delete
from kafka_ha.model import LeaderAndIsr, PartitionStateInfo, TopicPartition
from kafka_ha.zk.controller_store import ControllerMoved, ControllerStore
from kafka_ha.zk.errors import MalformedZnode

log = logging.getLogger("kafka_ha.controller")


class KafkaController:
    def __init__(self, config: BrokerConfig, zk: KazooClient | None,
                 register_broker: Callable[[], None], store: ControllerStore | None = None,
                 new_channel: Callable[[], ControllerChannel] | None = None) -> None:
        """``store`` and ``new_channel`` (called for each term's channel) default to
        ZooKeeper through ``zk`` and sockets; unit tests pass in-memory ones."""
        self.config = config
        self.broker_id = config.broker_id
        self.zk = zk
        self.store = store if store is not None else ControllerStore(zk, self.broker_id)
        self._new_channel = new_channel or (lambda: ControllerChannel(
            self.broker_id, self.config["controller.socket.timeout.ms"] / 1000))
        self._register_broker = register_broker
        self.ctx = ControllerContext()
        self.active = False
        self.channel: ControllerChannel | None = None
        self.psm: PartitionStateMachine | None = None
        self._session_lost = False
        self.balancing = LeaderBalancing(self)
        self.deletion = TopicDeletion(self)
        self.reassignment = Reassignment(self)
        self.shutdowns = ControlledShutdown(self)
        self._rebalancer: gevent.Greenlet | None = None
        self.loop = EventLoop({
            ev.Startup: self._on_startup,
            ev.ControllerChange: lambda e: self._elect(),
            ev.NewSession: self._on_new_session,
            ev.SessionExpired: lambda e: self._resign("ZooKeeper session expired", touch_zk=False),
            ev.BrokerChange: self._active_only(self._on_broker_change),
            ev.TopicChange: self._active_only(self._on_topic_change),
            ev.PartitionModifications: self._active_only(self._on_partition_modifications),
            ev.IsrChangeNotification: self._active_only(self._on_isr_change_notification),
            ev.PreferredReplicaElection: self._active_only(self.balancing.on_request),
            ev.AutoRebalance: self._active_only(self.balancing.auto_rebalance),
            ev.TopicDeletion: self._active_only(self.deletion.on_markers),
            ev.StopReplicaResult: self._active_only(self.deletion.on_stop_replica_result),
            ev.PartitionReassignment: self._active_only(self.reassignment.on_request),
            ev.ControlledShutdownRequest: self.shutdowns.on_request,
            ev.TopicConfigChange: self._active_only(self._on_topic_config_change),
            ev.Shutdown: lambda e: self._resign("broker shutting down", touch_zk=True),
        }, self._on_error)

    # ---- lifecycle --------------------------------------------------------

    def start(self) -> None:
        self.zk.add_listener(self._session_listener)
        self.loop.start()
        self.loop.put(ev.Startup())

    def shutdown(self) -> None:
        self.loop.put(ev.Shutdown())
        self.loop.stop()

    def _session_listener(self, state: str) -> None:
        # Runs on kazoo's callback greenlet: only enqueue.
        if state == KazooState.LOST:
            self._session_lost = True
            self.loop.put(ev.SessionExpired())
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self.loop.put(ev.NewSession())

    def _watch(self, event: object) -> Callable:
        return lambda _watched_event: self.loop.put(event)

    _ADMIN_EVENTS = {"preferred": ev.PreferredReplicaElection, "deletion": ev.TopicDeletion,
                     "reassignment": ev.PartitionReassignment}

    def watch_event(self, name: str) -> Callable:
        """A ZooKeeper watch that enqueues the named admin event (for the admin handlers)."""
        return self._watch(self._ADMIN_EVENTS[name]())

    def read_admin_request(self, path: str, decode: Callable, watch_name: str, what: str):
        """An admin request znode's value (None if absent), with its watch re-armed.

        A request that cannot be parsed is reported and removed: another tool
        may then write a correct one (Kafka 2.x logs "Ignoring ... invalid json").
        """
        try:
            value, _ = self.store.read_admin_znode(path, decode, watch=self.watch_event(watch_name))
        except MalformedZnode as e:
            log.error("Ignoring and removing the %s request: %s", what, e)
            self.store.fenced_delete(path)
            return None
        return value

    def enqueue(self, event: object) -> None:
        self.loop.put(event)

    def new_batch(self) -> RequestBatch:
        return self._new_batch()

    def resume_deletions(self) -> None:
        self.deletion.resume()

    def request_controlled_shutdown(self, broker_id: int, timeout_s: float) -> dict:
        """Called by the request handler of ControlledShutdown (key 7); waits for the loop's answer."""
        reply = AsyncResult()
        self.loop.put(ev.ControlledShutdownRequest(broker_id, reply))
        try:
            return reply.get(timeout=timeout_s)
        except gevent.Timeout:
            return {"error_code": -1, "remaining_partitions": []}

    def _active_only(self, handler: Callable) -> Callable:
        def run(event: object) -> None:
            if self.active:
                handler(event)
        return run

    def _on_error(self, event: object, error: BaseException) -> None:
        if isinstance(error, ControllerMoved):
            self._resign(f"controller moved: {error}", touch_zk=False)
            self._elect()  # learn who the controller is and re-arm the watch
        elif isinstance(error, SessionExpiredError):
            # Expected, no bug: the session listener has queued SessionExpired
            # (resign) and NewSession (re-register and re-elect) behind this event.
            log.warning("Abandoned %s: the ZooKeeper session ended (%s)", type(event).__name__,
                        str(error) or "session expired")
        else:
            log.exception("Error handling %s; the controller carries on", type(event).__name__,
                          exc_info=error)

    # ---- election -------------------------------------------------------

    def _on_startup(self, _event: object) -> None:
        self.store.zk.call("the broker registration", self._register_broker)
        self._elect()

    def _on_new_session(self, _event: object) -> None:
        self._resign("new ZooKeeper session", touch_zk=False)
        # Registration is safe to repeat (it accepts a node this session owns).
        self.store.zk.call("the broker registration", self._register_broker)
        self._elect()

    def _elect(self) -> None:
        controller = self.store.controller_id(watch=self._watch(ev.ControllerChange()))
        if controller == self.broker_id and not self.active and \
                self.store.delete_controller_of_previous_process():
            controller = None   # elect now, not when that process's session expires
        if controller is not None:
            if controller != self.broker_id and self.active:
                self._resign(f"broker {controller} is the controller now", touch_zk=False)
            return
        if self.active:
            # Our /controller is gone (an operator deleted it): end this term before
            # another, even if we win it, as Kafka 2.x's Reelect does; else the old
            # term's channel and rebalance timer would run beside the new ones.
            self._resign("/controller was deleted", touch_zk=False)
        result = self.store.try_elect()
        if result.won:
            log.info("Broker %d won the controller election at epoch %d", self.broker_id, result.epoch)
            self._on_failover(result.epoch)
        else:
            log.info("Broker %d lost the controller election to broker %s", self.broker_id,
                     result.controller_id)

    def _resign(self, why: str, touch_zk: bool) -> None:
        if not self.active:
            return
        log.info("Broker %d resigns as controller (epoch %d): %s", self.broker_id, self.ctx.epoch, why)
        self.active = False
        if self._rebalancer is not None:
            self._rebalancer.kill(block=False)
            self._rebalancer = None
        self.reassignment.started.clear()
        if self.channel is not None:
            self.channel.stop()
            self.channel = None
        self.store.resign(delete_znode=touch_zk)  # also unties the store from this term's session
        self.ctx = ControllerContext()

    # ---- failover (reference/controller.md §4, 2.x order) ----------------

    def _on_failover(self, epoch: int) -> None:
        started = time.monotonic()
        self.ctx = ControllerContext()
        self.ctx.epoch = epoch
        self.active = True
        self.psm = PartitionStateMachine(self.ctx, self.store, self.broker_id)
        # Register watches before reading the state they guard, so that no
        # change between the read and the watch goes unnoticed.
        self.ctx.live_brokers = self.store.live_brokers(watch=self._watch(ev.BrokerChange()))
        topics = self.store.topics(watch=self._watch(ev.TopicChange()))
        self._load_topics(topics)
        self.deletion.load_markers()  # before anything is sent: see outside_deletion
        # Everything is re-read and sent below, so pending ISR notifications are
        # stale: drop them (Kafka 2.x does the same on failover).
        for path in self.store.isr_change_notifications(watch=self._watch(ev.IsrChangeNotification())):
            self.store.fenced_delete(path)
        self.channel = self._new_channel()
        self.channel.set_brokers(self.ctx.live_brokers)
        loaded_ms = (time.monotonic() - started) * 1000
        batch = self._new_batch()
        # UpdateMetadata goes out before any LeaderAndIsr so brokers know the
        # live set first (Kafka 2.x); a batch sends its UpdateMetadata first.
        batch.add_update_metadata(self.ctx.live_brokers, self._all_partition_infos())
        # Brokers that died while there was no controller: their partitions
        # are elected and their replicas leave the ISRs now.
        self._bring_online(self.ctx.new_partitions(), self.ctx.partitions_with_dead_members(), batch)
        for tp in self.ctx.outside_deletion(self.ctx.states):
            replicas = self.ctx.assignments[tp]
            batch.add_leader_and_isr(replicas, PartitionStateInfo.of(tp, self.ctx.states[tp], replicas))
        batch.send(self.channel)
        # Then the admin work a previous controller may have left: reassignments,
        # deletions and preferred elections, in Kafka 2.x's order.
        self.reassignment.on_request()
        self.deletion.resume()
        self.balancing.on_request()
        if self.config["auto.leader.rebalance.enable"]:
            self._rebalancer = gevent.spawn(self._rebalance_timer)
        log.info("Controller %d epoch %d: loaded %d brokers, %d topics, %d partitions in %.0f ms; "
                 "failover done in %.0f ms", self.broker_id, epoch, len(self.ctx.live_brokers),
                 len(self.ctx.topics), len(self.ctx.assignments), loaded_ms,
                 (time.monotonic() - started) * 1000)

    def _rebalance_timer(self) -> None:
        interval = self.config["leader.imbalance.check.interval.seconds"]
        gevent.sleep(min(5, interval))  # Kafka's first check comes 5 s after failover
        while True:
            self.loop.put(ev.AutoRebalance())
            gevent.sleep(interval)

    def _on_topic_config_change(self, event: ev.TopicConfigChange) -> None:
        if event.topic not in self.ctx.topics or event.topic in self.ctx.deleting_topics:
            return
        self.ctx.topic_configs.update(self.store.topic_configs([event.topic]))
        # Enabling unclean election takes effect at once (Kafka 2.x's
        # TopicUncleanLeaderElectionEnable): partitions of the topic that wait for
        # an ISR member to return may elect any live replica now.
        offline = self.ctx.offline_partitions(self.ctx.partitions_of(event.topic))
        if offline and self._unclean_allowed(event.topic):
            log.info("Unclean leader election has been enabled for topic %s: electing leaders "
                     "for its offline partitions %s", event.topic, sorted(tp.partition for tp in offline))
            batch = self._new_batch()
            self._bring_online([], offline, batch)
            batch.send(self.channel)

    def _load_topics(self, topics: list[str]) -> list[TopicPartition]:
        """Read assignments, configs and states of these topics into the context."""
        assignments = self.store.topic_assignments(
            topics, watch_for=lambda t: self._watch(ev.PartitionModifications(t)))
        configs = self.store.topic_configs(t for t, a in assignments.items() if a is not None)
        added = []
        for topic, assignment in assignments.items():
            if assignment is None:
                continue
            self.ctx.topic_configs[topic] = configs.get(topic, {})
            for p, replicas in assignment.partitions.items():
                tp = TopicPartition(topic, p)
                if tp not in self.ctx.assignments:
                    self.ctx.set_assignment(tp, replicas)
                    added.append(tp)
        self._load_states(added)
        return added

    def _load_states(self, partitions: list[TopicPartition]) -> None:
        for tp, stored in self.store.partition_states(partitions).items():
            if stored is None:
                continue  # New: the state is created when a replica is live
            problem = (str(stored) if isinstance(stored, MalformedZnode)
                       else election.validate_against_assignment(stored, self.ctx.assignments[tp]))
            if problem:
                log.error("Skipping partition %s: its state znode is unusable: %s", tp, problem)
                self.ctx.unusable.add(tp)
                continue
            self.ctx.states[tp] = stored

    # ---- partition state changes ----------------------------------------

    def _new_batch(self) -> RequestBatch:
        return RequestBatch(self.broker_id, self.ctx.epoch, self.ctx.live_brokers)

    def _unclean_allowed(self, topic: str) -> bool:
        return bool(topic_setting("unclean.leader.election.enable",
                                  self.ctx.topic_configs.get(topic, {}), self.config))

    def _all_partition_infos(self) -> list[PartitionStateInfo]:
        """For UpdateMetadata; topics being deleted with leader -2, so brokers drop them (Kafka 2.x)."""
        deleting = self.ctx.deleting_topics
        return [state_during_delete(self.ctx, tp) if tp.topic in deleting
                else PartitionStateInfo.of(tp, s, self.ctx.assignments[tp])
                for tp, s in self.ctx.states.items()]

    def _bring_online(self, new: list[TopicPartition], offline: list[TopicPartition],
                      batch: RequestBatch, exclude: frozenset[int] = frozenset()) -> None:
        """Create states of new partitions and elect leaders for offline ones (not being deleted)."""
        new = [tp for tp in self.ctx.outside_deletion(new) if tp not in self.ctx.unusable]
        offline = self.ctx.outside_deletion(offline)
        if new:
            self.psm.create(new, batch)
            offline = list(dict.fromkeys(offline + self.ctx.offline_partitions(new)))
        if offline:
            self.psm.change(offline, self._decide_for_live(self.ctx.live_broker_ids - exclude), batch)

    def _decide_for_live(self, live: set[int]) -> Callable[[TopicPartition, LeaderAndIsr], election.Outcome]:
        epoch = self.ctx.epoch

        def decide(tp: TopicPartition, current: LeaderAndIsr) -> election.Outcome:
            return election.on_brokers_changed(current, self.ctx.assignments[tp], live,
                                               self._unclean_allowed(tp.topic), epoch)
        return decide

    # ---- broker changes (controller.md §5) --------------------------------

    def _on_broker_change(self, _event: object) -> None:
        known = self.ctx.live_brokers
        current = self.store.live_brokers(watch=self._watch(ev.BrokerChange()))
        dead = set(known) - set(current)
        new = set(current) - set(known)
        # A broker that re-registered between two events has a new czxid
        # (KIP-380): treat it as a failure followed by a start-up.
        bounced = {b for b in set(known) & set(current) if known[b].epoch != current[b].epoch}
        if not (dead or new or bounced):
            return
        log.info("Broker change: new %s, dead %s, bounced %s; live now %s", sorted(new),
                 sorted(dead), sorted(bounced), sorted(current))
        self.ctx.live_brokers = current
        # A bounced broker's new incarnation did not ask to shut down: without this it
        # could never lead again (Kafka's onBrokerFailure forgets bounced ones too).
        self.ctx.shutting_down -= dead | bounced
        if self.ctx.unusable:
            # Give hand-edited state znodes another look: an operator may have fixed them.
            retry, self.ctx.unusable = list(self.ctx.unusable), set()
            self._load_states(retry)
        self.channel.set_brokers(current)
        if dead or bounced:
            self._on_broker_failure(dead | bounced)
            self.deletion.on_broker_failure(dead | bounced)
        if new or bounced:
            self._on_broker_startup(new | bounced)
            self.reassignment.progress()
            self.deletion.resume()

    def _on_broker_failure(self, dead: set[int]) -> None:
        started = time.monotonic()
        # Topics being deleted keep their states: a new one would send LeaderAndIsr to
        # brokers that deleted the logs already (TopicDeletion.on_broker_failure waits).
        affected = sorted(self.ctx.outside_deletion(self.ctx.replicas_on(dead)))
        live = self.ctx.live_broker_ids - dead
        batch = self._new_batch()
        batch.live_brokers = {b: i for b, i in self.ctx.live_brokers.items() if b not in dead}
        changed = self.psm.change(affected, self._decide_for_live(live), batch)
        batch.add_update_metadata(batch.live_brokers, [])
        written_ms = (time.monotonic() - started) * 1000
        led = sum(1 for s in changed.values() if s.leader >= 0)

        def acked(ms: float) -> None:
            log.info("Broker failure %s handled: %d partitions affected, %d state znodes written "
                     "(%d with a leader) in %.0f ms; LeaderAndIsr acknowledged %.0f ms after the "
                     "event started", sorted(dead), len(affected), len(changed), led, written_ms,
                     written_ms + ms)
        batch.send(self.channel, on_acked=acked)

    def _on_broker_startup(self, new: set[int]) -> None:
        batch = self._new_batch()
        infos = self._all_partition_infos()
        batch.add_update_metadata(new, infos)
        batch.add_update_metadata(set(self.ctx.live_brokers) - new, [])
        # Their replicas go online: each new broker learns its current role (those of
        # topics being deleted get StopReplica from deletion.resume() instead).
        for tp in self.ctx.outside_deletion(self.ctx.replicas_on(new)):
            state = self.ctx.states.get(tp)
            if state is not None:
                replicas = self.ctx.assignments[tp]
                batch.add_leader_and_isr(new & set(replicas), PartitionStateInfo.of(tp, state, replicas),
                                         with_metadata=False)
        self._bring_online(self.ctx.new_partitions(), self.ctx.offline_partitions(), batch)
        batch.send(self.channel)

    # ---- ISR changes made by leaders (controller.md §13) -------------------

    def _on_isr_change_notification(self, _event: object) -> None:
        paths = self.store.isr_change_notifications(watch=self._watch(ev.IsrChangeNotification()))
        changed = self.store.read_isr_change_notifications(paths)
        known = [tp for tp in changed if tp in self.ctx.assignments]
        self._load_states(known)
        batch = self._new_batch()
        batch.add_update_metadata(self.ctx.live_brokers, [
            PartitionStateInfo.of(tp, self.ctx.states[tp], self.ctx.assignments[tp])
            for tp in self.ctx.outside_deletion(known) if tp in self.ctx.states])
        batch.send(self.channel)
        for path in paths:
            self.store.fenced_delete(path)
        self.reassignment.progress()
        if known:
            log.info("ISR changes of %d partitions sent to brokers %s", len(known),
                     sorted(self.ctx.live_brokers))

    # ---- topic changes (controller.md §6) ---------------------------------

    def _on_topic_change(self, _event: object) -> None:
        topics = set(self.store.topics(watch=self._watch(ev.TopicChange())))
        gone = self.ctx.topics - topics
        for topic in gone:
            log.info("Topic %s is gone from /brokers/topics", topic)
            self.ctx.remove_topic(topic)
        created = sorted(topics - self.ctx.topics)
        if created:
            added = self._load_topics(created)
            self._on_new_partitions(added)

    def _on_partition_modifications(self, event: ev.PartitionModifications) -> None:
        if event.topic not in self.ctx.topics:
            return  # deleted meanwhile; the topic-change handler owns that
        if event.topic in self.ctx.deleting_topics:
            log.info("Not adding partitions to topic %s: it is being deleted", event.topic)
            return
        added = self._load_topics([event.topic])
        if added:
            log.info("Partitions added to topic %s: %s", event.topic, [tp.partition for tp in added])
            self._on_new_partitions(added)

    def _on_new_partitions(self, added: list[TopicPartition]) -> None:
        batch = self._new_batch()
        new = [tp for tp in added if tp not in self.ctx.states]
        offline = self.ctx.offline_partitions(added)
        self._bring_online(new, offline, batch)
        # States adopted from ZooKeeper (created by an earlier controller) are
        # sent too; requests are keyed by partition, so nothing goes twice.
        for tp in added:
            state = self.ctx.states.get(tp)
            if state is not None:
                replicas = self.ctx.assignments[tp]
                batch.add_leader_and_isr(replicas, PartitionStateInfo.of(tp, state, replicas))
        batch.send(self.channel)
