"""Consumer groups: the classic protocol (classic.py), KIP-848 (consumer.py), committed offsets
on ``__consumer_offsets`` (offsets.py), all owned by the GroupCoordinator (coordinator.py)."""
