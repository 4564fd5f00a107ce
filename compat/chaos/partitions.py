"""Network partitions against a 3-broker pykbroker cluster, each server in its own network
namespace, every client operation checked (pykbroker/testing/partitions.py, checker.py).

    python compat/chaos/partitions.py                              # every nemesis, 120 s each
    python compat/chaos/partitions.py leader-zk bridge --seconds 60
    python compat/chaos/partitions.py --out compat/chaos/results   # results.md + run-<nemesis>.json

Needs root, iproute2 and iptables (tools/test.sh installs them).  Exit status 0 when no run
found an anomaly, 1 otherwise, 2 when namespaces cannot be made here.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from pykbroker.testing.partitions import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
