"""One command for the fault runs (pykbroker/testing/chaos.py): ZooKeeper + 3 brokers started
locally, idempotent acks=all producers, a nemesis, then Kafka's rule checked on what is read back.

    python compat/chaos/chaos.py                       # every scenario, 120 s each
    python compat/chaos/chaos.py kill-leader --seconds 60 --json /tmp/chaos.json
    python compat/chaos/chaos.py --java                # plus an idempotent acks=all Java producer
    python compat/chaos/chaos.py --java 2 --java-profile kafka4

``--java [N]`` adds N Java kafka-clients producers (compat/java's ``produce_load`` scenario, one
JVM each, built with Maven on first use) beside the confluent-kafka ones: same value scheme
``<producer>-<seq>``, their acknowledgements (partition, offset, value) read from their stdout,
so the checker covers both clients.

Exit status 0 when no acknowledged record was lost, duplicated or moved in any run.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from pykbroker.testing.chaos import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
