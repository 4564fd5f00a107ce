"""The transaction coordinator: ``coordinator.py`` (the state machine: the requests'
transitions, completion, timeouts and expiry, and a partition's replay), ``metadata.py`` (a
transactional id's state and one transition's target), ``state_store.py`` (the writer of
``__transaction_state`` on this broker and its error mapping), ``state_log.py`` (the record layout), ``markers.py`` (writing the
COMMIT/ABORT markers, in process or by WriteTxnMarkers, and KIP-890 verification with another
broker's coordinator)."""
