"""The remote tier: Kafka-format segments in object storage, committed by conditional writes.

A topic with ``remote.storage.enable=true`` (KIP-405's name) keeps its rolled segments in the
location ``LOGPLAT_REMOTE_STORAGE`` names (:mod:`.location`) as immutable objects
(:mod:`.names`); each partition's state is a sequence of numbered versions (:mod:`.version`),
the next committed only if absent (:mod:`.partition`), never by rename. Reads, compaction,
retention, history and the sweep of released objects build on these; ``docs/object-storage.md``
is the protocol.
"""
