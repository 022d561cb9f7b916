"""The group coordinator (Kafka 0.9-2.x): consumer group membership and offsets
kept in the compacted ``__consumer_offsets`` topic."""
