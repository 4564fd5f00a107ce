"""One command for the fault runs (pykbroker/testing/chaos.py): ZooKeeper + 3 brokers started
locally, idempotent acks=all producers, a nemesis, then Kafka's rule checked on what is read back.

    python compat/chaos/chaos.py                       # every scenario, 120 s each
    python compat/chaos/chaos.py kill-leader --seconds 60 --json /tmp/chaos.json

Exit status 0 when no acknowledged record was lost, duplicated or moved in any run.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from pykbroker.testing.chaos import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
