"""The controller: election, failover, and the handlers of broker and topic changes.

Every broker runs one of these; the one that wins ``/controller`` is active.
All handlers run on the event loop's single greenlet.  ZooKeeper watch
callbacks only enqueue an event; handlers re-read ZooKeeper and re-arm the
watch in the same call.  What a controller holds while it is the controller
is its term (term.py): made on election, dropped on resignation, and handed
to every handler that needs it.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

import gevent
from gevent.event import AsyncResult

from kafka_ha import metrics
from kafka_ha.config import BrokerConfig, topic_setting
from kafka_ha.controller import broker_failure, controlled_shutdown, election, events as ev
from kafka_ha.controller.channel import ControllerChannel
from kafka_ha.controller.context import ControllerContext
from kafka_ha.controller.event_loop import EventLoop
from kafka_ha.controller.leader_balancing import LeaderBalancing
from kafka_ha.controller.reassignment import Reassignment
from kafka_ha.controller.request_batch import RequestBatch
from kafka_ha.controller.term import ControllerTerm
from kafka_ha.controller.topic_deletion import TopicDeletion, state_during_delete
from kafka_ha.model import LeaderAndIsr, PartitionStateInfo, TopicPartition
from kafka_ha.zk.controller_store import ControllerStore, Election
from kafka_ha.zk.errors import MalformedZnode, ZkSessionExpired
from kafka_ha.zk.mapped_client import SessionState
from kafka_ha.zk.state_writes import ControllerMoved

log = logging.getLogger("kafka_ha.controller")


class KafkaController:
    def __init__(self, config: BrokerConfig, store: ControllerStore,
                 register_broker: Callable[[], None],
                 new_channel: Callable[[], ControllerChannel] | None = None) -> None:
        """``new_channel`` (called for each term's channel) defaults to sockets; unit tests
        pass an in-memory store and channels."""
        self.config = config
        self.broker_id = config.broker_id
        self.store = store
        self._new_channel = new_channel or (lambda: ControllerChannel(
            self.broker_id, self.config["controller.socket.timeout.ms"] / 1000))
        self._register_broker = register_broker
        self.term: ControllerTerm | None = None  # while this broker is the controller
        self._session_lost = False
        self.balancing = LeaderBalancing(self.store, config, self.read_admin_request)
        self.deletion = TopicDeletion(self.store, config, lambda: self._watch(ev.TopicDeletion()),
                                      self.enqueue)
        self.reassignment = Reassignment(self.store, self.read_admin_request, self.deletion.resume)
        self.loop = EventLoop({
            ev.Startup: self._on_startup,
            ev.ControllerChange: lambda e: self._elect(),
            ev.NewSession: self._on_new_session,
            ev.SessionExpired: lambda e: self._resign("ZooKeeper session expired", touch_zk=False),
            # Kafka times its BrokerChange event as LeaderElectionRateAndTimeMs.
            ev.BrokerChange: metrics.timed_election(self._in_term(self._on_broker_change)),
            ev.TopicChange: self._in_term(self._on_topic_change),
            ev.PartitionModifications: self._in_term(self._on_partition_modifications),
            ev.IsrChangeNotification: self._in_term(self._on_isr_change_notification),
            ev.PreferredReplicaElection: self._in_term(self.balancing.on_request),
            ev.AutoRebalance: self._in_term(self.balancing.auto_rebalance),
            ev.TopicDeletion: self._in_term(self.deletion.on_markers),
            ev.StopReplicaResult: self._in_term(self.deletion.on_stop_replica_result),
            ev.PartitionReassignment: self._in_term(self.reassignment.on_request),
            ev.ControlledShutdownRequest: lambda e: controlled_shutdown.on_request(self.term, e),
            ev.TopicConfigChange: self._in_term(self._on_topic_config_change),
            ev.Shutdown: lambda e: self._resign("broker shutting down", touch_zk=True),
        }, self._on_error)

    @property
    def active(self) -> bool:
        """Whether this broker is the controller (it has a term)."""
        return self.term is not None

    # ---- lifecycle --------------------------------------------------------

    def start(self) -> None:
        self.store.add_session_listener(self._session_listener)
        self.loop.start()
        self.loop.put(ev.Startup())

    def shutdown(self) -> None:
        self.loop.put(ev.Shutdown())
        self.loop.stop()

    def _session_listener(self, state: SessionState) -> None:
        # Runs on the ZooKeeper client's callback greenlet: only enqueue.
        if state is SessionState.LOST:
            self._session_lost = True
            self.loop.put(ev.SessionExpired())
        elif state is SessionState.CONNECTED and self._session_lost:
            self._session_lost = False
            self.loop.put(ev.NewSession())

    def _watch(self, event: object) -> Callable:
        return lambda _watched_event: self.loop.put(event)

    def _watch_assignment(self, topic: str) -> Callable:
        return self._watch(ev.PartitionModifications(topic))

    def read_admin_request(self, path: str, decode: Callable, event: object, what: str):
        """An admin request znode's value (None if absent), with its watch (which queues
        ``event``) re-armed.

        A request that cannot be parsed is reported and removed: another tool
        may then write a correct one (Kafka 2.x logs "Ignoring ... invalid json").
        """
        try:
            value, _ = self.store.read_admin_znode(path, decode, watch=self._watch(event))
        except MalformedZnode as e:
            log.error("Ignoring and removing the %s request: %s", what, e)
            self.store.fenced_delete(path)
            return None
        return value

    def enqueue(self, event: object) -> None:
        self.loop.put(event)

    def request_controlled_shutdown(self, broker_id: int, timeout_s: float, broker_epoch: int = -1) -> dict:
        """Called by the request handler of ControlledShutdown (key 7); waits for the loop's answer."""
        reply = AsyncResult()
        self.loop.put(ev.ControlledShutdownRequest(broker_id, reply, broker_epoch))
        try:
            return reply.get(timeout=timeout_s)
        except gevent.Timeout:
            return {"error_code": -1, "remaining_partitions": []}

    def _in_term(self, handler: Callable[[ControllerTerm, object], None]) -> Callable:
        """``handler(term, event)`` while this broker is the controller; nothing otherwise."""
        def run(event: object) -> None:
            if self.term is not None:
                handler(self.term, event)
        return run

    def _on_error(self, event: object, error: BaseException) -> None:
        if isinstance(error, ControllerMoved):
            self._resign(f"controller moved: {error}", touch_zk=False)
            self._elect()  # learn who the controller is and re-arm the watch
        elif isinstance(error, ZkSessionExpired):
            # Expected, no bug: the session listener has queued SessionExpired
            # (resign) and NewSession (re-register and re-elect) behind this event.
            log.warning("Abandoned %s: the ZooKeeper session ended (%s)", type(event).__name__,
                        str(error) or "session expired")
            if isinstance(event, ev.NewSession) and not self._session_lost:
                # But no loss since the one this event answers: no further NewSession
                # will come (kazoo failed a request with "Connection has been closed"
                # while the new session lived on), and the broker would stay unregistered.
                # Handling it again is safe: registering and electing are idempotent.
                log.warning("Handling NewSession again: no newer session loss was seen")
                self.loop.put(ev.NewSession())
        else:
            log.exception("Error handling %s; the controller carries on", type(event).__name__,
                          exc_info=error)

    # ---- election -------------------------------------------------------

    def _on_startup(self, _event: object) -> None:
        self.store.run_in_session("the broker registration", self._register_broker)
        self._elect()

    def _on_new_session(self, _event: object) -> None:
        self._resign("new ZooKeeper session", touch_zk=False)
        # Registration is safe to repeat (it accepts a node this session owns).
        self.store.run_in_session("the broker registration", self._register_broker)
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
            self._on_failover(result)
        else:
            log.info("Broker %d lost the controller election to broker %s", self.broker_id,
                     result.controller_id)

    def _resign(self, why: str, touch_zk: bool) -> None:
        term, self.term = self.term, None
        if term is None:
            return
        log.info("Broker %d resigns as controller (epoch %d): %s", self.broker_id, term.epoch, why)
        term.end()
        self.store.resign(delete_znode=touch_zk)  # also unties the store from this term's session

    # ---- failover (Kafka 2.x's order, docs/design.md §4) ------------------

    def _on_failover(self, won: Election) -> None:
        started = time.monotonic()
        term = self.term = ControllerTerm(self.broker_id, won, self.store, self._new_channel())
        ctx = term.ctx
        # Register watches before reading the state they guard, so that no
        # change between the read and the watch goes unnoticed.
        ctx.live_brokers = self.store.live_brokers(watch=self._watch(ev.BrokerChange()))
        topics = self.store.topics(watch=self._watch(ev.TopicChange()))
        term.load_topics(topics, self._watch_assignment)
        self.deletion.load_markers(term)  # before anything is sent: see outside_deletion
        # Everything is re-read and sent below, so pending ISR notifications are
        # stale: drop them (Kafka 2.x does the same on failover).
        self.store.fenced_delete_all(
            self.store.isr_change_notifications(watch=self._watch(ev.IsrChangeNotification())))
        term.channel.set_brokers(ctx.live_brokers)
        loaded_ms = (time.monotonic() - started) * 1000
        # As Kafka 2.x's onControllerFailover: UpdateMetadata with the states as
        # loaded goes out first, so every broker learns the new controller and the
        # live set before the elections below (seconds, at 100k partitions).
        announce = term.new_batch()
        announce.add_update_metadata(ctx.live_brokers, self._all_partition_infos(term))
        announce.send(term.channel)
        announced_ms = (time.monotonic() - started) * 1000
        batch = term.new_batch()
        # Brokers that died while there was no controller: their partitions
        # are elected and their replicas leave the ISRs now; the batch carries
        # UpdateMetadata for what changed, ahead of its LeaderAndIsr.
        self._bring_online(term, ctx.new_partitions(), ctx.partitions_with_dead_members(), batch)
        for tp in ctx.outside_deletion(ctx.states):
            replicas = ctx.assignments[tp]
            batch.add_leader_and_isr(replicas, PartitionStateInfo.of(tp, ctx.states[tp], replicas))
        batch.send(term.channel)
        # Then the admin work a previous controller may have left: reassignments,
        # deletions and preferred elections, in Kafka 2.x's order.
        self.reassignment.on_request(term)
        self.deletion.resume(term)
        self.balancing.on_request(term)
        if self.config["auto.leader.rebalance.enable"]:
            interval = self.config["leader.imbalance.check.interval.seconds"]
            # Kafka's first check comes 5 s after failover.
            term.every(min(5, interval), interval, lambda: self.loop.put(ev.AutoRebalance()))
        log.info("Controller %d epoch %d: loaded %d brokers, %d topics, %d partitions in %.0f ms; "
                 "first UpdateMetadata sent at %.0f ms; failover done in %.0f ms", self.broker_id,
                 term.epoch, len(ctx.live_brokers), len(ctx.topics), len(ctx.assignments), loaded_ms,
                 announced_ms, (time.monotonic() - started) * 1000)

    def _on_topic_config_change(self, term: ControllerTerm, event: ev.TopicConfigChange) -> None:
        ctx = term.ctx
        if event.topic not in ctx.topics or event.topic in ctx.deleting_topics:
            return
        ctx.topic_configs.update(self.store.topic_configs([event.topic]))
        # Enabling unclean election takes effect at once (Kafka 2.x's
        # TopicUncleanLeaderElectionEnable): partitions of the topic that wait for
        # an ISR member to return may elect any live replica now.
        offline = ctx.offline_partitions(ctx.partitions_of(event.topic))
        if offline and self._unclean_allowed(ctx, event.topic):
            log.info("Unclean leader election has been enabled for topic %s: electing leaders "
                     "for its offline partitions %s", event.topic, sorted(tp.partition for tp in offline))
            batch = term.new_batch()
            self._bring_online(term, [], offline, batch)
            batch.send(term.channel)

    # ---- partition state changes ----------------------------------------

    def _unclean_allowed(self, ctx: ControllerContext, topic: str) -> bool:
        return bool(topic_setting("unclean.leader.election.enable",
                                  ctx.topic_configs.get(topic, {}), self.config))

    @staticmethod
    def _all_partition_infos(term: ControllerTerm) -> list[PartitionStateInfo]:
        """For UpdateMetadata; topics being deleted with leader -2, so brokers drop them (Kafka 2.x)."""
        ctx = term.ctx
        return [state_during_delete(term, tp) if tp.topic in ctx.deleting_topics
                else PartitionStateInfo.of(tp, s, ctx.assignments[tp]) for tp, s in ctx.states.items()]

    def _bring_online(self, term: ControllerTerm, new: list[TopicPartition],
                      offline: list[TopicPartition], batch: RequestBatch) -> tuple[int, int]:
        """Create states of new partitions and elect leaders for offline ones (not being
        deleted); returns (partitions it tried, state znodes it wrote by elections)."""
        ctx = term.ctx
        new = [tp for tp in ctx.outside_deletion(new) if tp not in ctx.unusable]
        offline = ctx.outside_deletion(offline)
        if new:
            term.psm.create(new, batch)
            offline = list(dict.fromkeys(offline + ctx.offline_partitions(new)))
        changed = {}
        if offline:
            changed = term.psm.change(offline, self._decide_for_live(term, ctx.live_broker_ids), batch)
        return len(new) + len(offline), len(changed)

    def _decide_for_live(self, term: ControllerTerm, live: set[int]
                         ) -> Callable[[TopicPartition, LeaderAndIsr], election.Outcome]:
        ctx = term.ctx

        def decide(tp: TopicPartition, current: LeaderAndIsr) -> election.Outcome:
            return election.on_brokers_changed(current, ctx.assignments[tp], live,
                                               self._unclean_allowed(ctx, tp.topic), term.epoch)
        return decide

    # ---- broker changes (docs/design.md §3) -------------------------------

    def _on_broker_change(self, term: ControllerTerm, _event: object) -> None:
        ctx = term.ctx
        known = ctx.live_brokers
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
        ctx.live_brokers = current
        # A bounced broker's new incarnation did not ask to shut down: without this it
        # could never lead again (Kafka's onBrokerFailure forgets bounced ones too).
        ctx.shutting_down -= dead | bounced
        if ctx.unusable:
            # Give hand-edited state znodes another look: an operator may have fixed them.
            retry, ctx.unusable = list(ctx.unusable), set()
            term.load_states(retry)
        term.channel.set_brokers(current)
        if dead or bounced:
            self._on_broker_failure(term, dead | bounced)
            self.deletion.on_broker_failure(term, dead | bounced)
        if new or bounced:
            self._on_broker_startup(term, new | bounced)
            self.reassignment.progress(term)
            self.deletion.resume(term)

    def _on_broker_failure(self, term: ControllerTerm, dead: set[int]) -> None:
        live = term.ctx.live_broker_ids - dead
        broker_failure.on_broker_failure(term, dead, self._decide_for_live(term, live))

    def _on_broker_startup(self, term: ControllerTerm, new: set[int]) -> None:
        started = time.monotonic()
        ctx = term.ctx
        batch = term.new_batch()
        batch.add_update_metadata(new, self._all_partition_infos(term))
        batch.add_update_metadata(set(ctx.live_brokers) - new, [])
        # Sent at once, as Kafka does: until it comes, a new broker answers clients with
        # UNKNOWN_TOPIC_OR_PARTITION, and the elections below write ZooKeeper first
        # (0.8 s at 10k partitions).  The channel keeps each broker's requests in order.
        batch.send(term.channel)
        metadata_ms = (time.monotonic() - started) * 1000
        batch = term.new_batch()
        # Their replicas go online: each new broker learns its current role (those of
        # topics being deleted get StopReplica from deletion.resume() instead).
        hosted = ctx.outside_deletion(ctx.replicas_on(new))
        for tp in hosted:
            state = ctx.states.get(tp)
            if state is not None:
                replicas = ctx.assignments[tp]
                batch.add_leader_and_isr(new & set(replicas), PartitionStateInfo.of(tp, state, replicas),
                                         with_metadata=False)
        elections_from = time.monotonic()
        tried, written = self._bring_online(term, ctx.new_partitions(), ctx.offline_partitions(), batch)
        written_ms = (time.monotonic() - elections_from) * 1000
        metadata_size = len(ctx.states)

        def acked(ms: float) -> None:
            log.info("Broker startup %s handled: UpdateMetadata of %d partitions sent in %.0f ms; "
                     "%d replicas on it, %d partitions brought online; %d state znodes written in "
                     "%.0f ms; LeaderAndIsr acknowledged %.0f ms after the event started", sorted(new),
                     metadata_size, metadata_ms, len(hosted), tried, written, written_ms,
                     (elections_from - started) * 1000 + written_ms + ms)
        batch.send(term.channel, on_acked=acked)

    # ---- ISR changes made by leaders (docs/design.md §6.2) ------------------

    def _on_isr_change_notification(self, term: ControllerTerm, _event: object) -> None:
        ctx = term.ctx
        paths = self.store.isr_change_notifications(watch=self._watch(ev.IsrChangeNotification()))
        changed = self.store.read_isr_change_notifications(paths)
        known = [tp for tp in changed if tp in ctx.assignments]
        term.load_states(known)
        batch = term.new_batch()
        batch.add_update_metadata(ctx.live_brokers, [
            PartitionStateInfo.of(tp, ctx.states[tp], ctx.assignments[tp])
            for tp in ctx.outside_deletion(known) if tp in ctx.states])
        batch.send(term.channel)
        self.store.fenced_delete_all(paths)
        self.reassignment.progress(term)
        if known:
            log.info("ISR changes of %d partitions sent to brokers %s", len(known),
                     sorted(ctx.live_brokers))

    # ---- topic changes (docs/design.md §7) --------------------------------

    def _on_topic_change(self, term: ControllerTerm, _event: object) -> None:
        ctx = term.ctx
        topics = set(self.store.topics(watch=self._watch(ev.TopicChange())))
        for topic in ctx.topics - topics:
            log.info("Topic %s is gone from /brokers/topics", topic)
            ctx.remove_topic(topic)
        created = sorted(topics - ctx.topics)
        if created:
            self._on_new_partitions(term, term.load_topics(created, self._watch_assignment))

    def _on_partition_modifications(self, term: ControllerTerm, event: ev.PartitionModifications) -> None:
        if event.topic not in term.ctx.topics:
            return  # deleted meanwhile; the topic-change handler owns that
        if event.topic in term.ctx.deleting_topics:
            log.info("Not adding partitions to topic %s: it is being deleted", event.topic)
            return
        added = term.load_topics([event.topic], self._watch_assignment)
        if added:
            log.info("Partitions added to topic %s: %s", event.topic, [tp.partition for tp in added])
            self._on_new_partitions(term, added)

    def _on_new_partitions(self, term: ControllerTerm, added: list[TopicPartition]) -> None:
        ctx = term.ctx
        batch = term.new_batch()
        new = [tp for tp in added if tp not in ctx.states]
        self._bring_online(term, new, ctx.offline_partitions(added), batch)
        # States adopted from ZooKeeper (created by an earlier controller) are
        # sent too; requests are keyed by partition, so nothing goes twice.
        for tp in added:
            state = ctx.states.get(tp)
            if state is not None:
                replicas = ctx.assignments[tp]
                batch.add_leader_and_isr(replicas, PartitionStateInfo.of(tp, state, replicas))
        batch.send(term.channel)
