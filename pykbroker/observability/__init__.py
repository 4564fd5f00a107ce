"""Observability: Prometheus metrics (``metrics.py``), JSON log lines (``logfmt.py``), the
protocol trace (``trace.py``), the recording proxy (``proxy.py``) and the trace diff (``diff.py``).

Everything here is off unless asked for (``pykbroker serve --metrics/--trace/--log-format json``,
``pykbroker trace ...``).  The broker's only hook is ``BrokerServer.observer`` (``observer.py``): when it
is ``None`` (the default) a connection runs its usual path and pays one attribute check per
request; when set, the connection times each request and hands it to the observer once answered.
Nothing is counted per record: records are counted from batch headers, per batch.
"""
