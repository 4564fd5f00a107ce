"""The versions a broker sends other brokers (pykbroker/cluster/interbroker.py): the highest that
both its own code (the handler table, limited by ``--as-kafka``) and the receiver's ApiVersions
allow, as Kafka's NetworkClient negotiates; none when they share no version.  Sans-IO: the
real handler tables, the real profile tables as the receivers' ApiVersions.  (The same on real
processes: tests/java/test_transactions_v2.py runs a cluster with ``--as-kafka 4.0``.)"""
from pykbroker import profiles
from pykbroker.cluster.interbroker import InterBrokerVersions
from pykbroker.cluster.replica_fetcher import MAX_FETCH_VERSION, MIN_FETCH_VERSION
from pykbroker.handlers import load_handlers

FETCH, WRITE_TXN_MARKERS, ADD_PARTITIONS_TO_TXN = 1, 27, 24


def _versions(as_kafka=None):
    return InterBrokerVersions(profiles.apply(load_handlers(lazy=True), as_kafka))


def _advertised(as_kafka=None) -> dict:
    """What a broker run with that profile advertises in ApiVersions."""
    return {k: (h.MIN_VERSION, h.MAX_VERSION) for k, h in profiles.apply(load_handlers(lazy=True), as_kafka).items()}


def test_unprofiled_brokers_use_the_newest():
    v, theirs = _versions(), _advertised()
    assert v.usable(WRITE_TXN_MARKERS, theirs, 1, 2) == 2
    assert v.usable(ADD_PARTITIONS_TO_TXN, theirs, 4, 5) == 5
    assert v.usable(FETCH, theirs, MIN_FETCH_VERSION, MAX_FETCH_VERSION) == 18


def test_a_kafka_4_0_broker_sends_what_kafka_4_0_sends_whatever_the_receiver_offers():
    v = _versions("4.0")
    for theirs in (_advertised(), _advertised("4.0"), _advertised("4.4")):
        assert v.usable(WRITE_TXN_MARKERS, theirs, 1, 2) == 1
        assert v.usable(FETCH, theirs, MIN_FETCH_VERSION, MAX_FETCH_VERSION) == 17
        assert v.usable(ADD_PARTITIONS_TO_TXN, theirs, 4, 5) == 5


def test_the_receiver_limits_a_newer_sender():
    v = _versions()
    assert v.usable(WRITE_TXN_MARKERS, _advertised("4.0"), 1, 2) == 1
    assert v.usable(FETCH, _advertised("4.0"), MIN_FETCH_VERSION, MAX_FETCH_VERSION) == 17
    assert v.usable(FETCH, _advertised("2.8"), MIN_FETCH_VERSION, MAX_FETCH_VERSION) == 12


def test_no_common_version():
    # a Kafka 2.8 coordinator has no batched AddPartitionsToTxn (v4+): no verification there
    assert _versions().usable(ADD_PARTITIONS_TO_TXN, _advertised("2.8"), 4, 5) is None
    # nor does a 2.8 broker itself know it
    assert _versions("2.8").usable(ADD_PARTITIONS_TO_TXN, _advertised(), 4, 5) is None
    # an API the receiver does not serve at all
    assert _versions().usable(WRITE_TXN_MARKERS, {}, 1, 2) is None
