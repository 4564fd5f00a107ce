"""The transaction coordinator (issue 12): ``coordinator.py`` (state machine, markers, timeouts)
and ``state_log.py`` (the ``__transaction_state`` record layout)."""
