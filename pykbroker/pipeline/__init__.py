"""Data pipelines that ship with pykbroker (PySpark, an optional extra: ``pip install '.[pipeline]'`` in a checkout).

- ``clickstream`` — page-visit events into a topic, a Structured Streaming job through Spark's own
  Kafka connector (``spark-sql-kafka-0-10``) computing windowed visits and distinct visitors per
  site, aggregates written to an output topic, and a live summary as windows close.
- ``spark`` — the SparkSession every pipeline (and the Spark test suite) uses: local mode, the real
  connector for the installed PySpark version resolved from Maven Central, nothing else changed.
"""
