"""What the request handlers share, kept apart from the ``kNN_*`` handler modules: the handler
table's versions (``versions.py``), the services a handler is handed (``services.py``), the
error-response builders and partition lookup (``common.py``), and the helpers of a family of
APIs (configs, groups, offsets, share state, delegation tokens, transactions).  No handler
imports another; code two handlers share lives here."""
