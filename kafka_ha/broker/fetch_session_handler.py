"""Incremental fetch sessions, the fetching side (KIP-227; the leader's side is fetch_sessions.py).

The handler knows what the leader's session holds: each partition's fetch
position as of the last request the leader served.  The next request lists only
the partitions whose position moved (or that are new) and forgets the ones no
longer fetched.  Any doubt -- an error from the leader, or a request that failed
in transit and may or may not have been served -- and the next request is a
full one that closes the old session and opens a new one.

>>> h = FetchSessionHandler()
>>> tp = TopicPartition("t", 0)
>>> h.build({tp: (5, 100)})                        # first: a full fetch opening a session
(0, 0, [(TopicPartition(topic='t', partition=0), (5, 100))], [])
>>> h.handle_response(0, 77)
True
>>> h.build({tp: (5, 100)})                        # nothing moved: an empty incremental fetch
(77, 1, [], [])
>>> h.handle_response(0, 77); h.build({})          # forget the partition
True
(77, 2, [], [TopicPartition(topic='t', partition=0)])
>>> h.handle_response(71, 0); h.build({tp: (9, 100)})   # refused: start over, closing 77
False
(77, 0, [(TopicPartition(topic='t', partition=0), (9, 100))], [])
"""
from __future__ import annotations

from kafka_ha.broker.fetch_sessions import INITIAL_EPOCH, NO_SESSION, next_epoch
from kafka_ha.model import TopicPartition
from kafka_ha.protocol.errors import ErrorCode

Position = tuple[int, int]   # (fetch_offset, partition_max_bytes)


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = NO_SESSION
        self.epoch = INITIAL_EPOCH
        self._held: dict[TopicPartition, Position] = {}     # the leader's view of the session
        self._pending: dict[TopicPartition, Position] = {}  # its view once the request in flight is served
        self._close_id = NO_SESSION                         # a session to close with the next full fetch

    def build(self, wanted: dict[TopicPartition, Position]
              ) -> tuple[int, int, list[tuple[TopicPartition, Position]], list[TopicPartition]]:
        """(session_id, epoch, partitions to send, partitions to forget) for the next request."""
        self._pending = dict(wanted)
        if self.session_id == NO_SESSION:
            return self._close_id, INITIAL_EPOCH, list(wanted.items()), []
        changed = [(tp, pos) for tp, pos in wanted.items() if self._held.get(tp) != pos]
        forgotten = [tp for tp in self._held if tp not in wanted]
        return self.session_id, self.epoch, changed, forgotten

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """Take the response's session fields; False if the session is lost (next fetch is full)."""
        if error_code != ErrorCode.NONE:
            self.handle_failure()
            return False
        if self.session_id == NO_SESSION:
            # A full fetch: the leader opened a session, or had no room (then the
            # next fetch is full again and asks once more).
            self._close_id = NO_SESSION
            if session_id != NO_SESSION:
                self.session_id, self.epoch = session_id, next_epoch(INITIAL_EPOCH)
                self._held = self._pending
            return True
        if session_id != self.session_id:
            self.handle_failure()
            return False
        self.epoch = next_epoch(self.epoch)
        self._held = self._pending
        return True

    def handle_failure(self) -> None:
        """The request failed or was refused: start over with a full fetch that closes the session."""
        if self.session_id != NO_SESSION:
            self._close_id = self.session_id
        self.session_id, self.epoch, self._held = NO_SESSION, INITIAL_EPOCH, {}
