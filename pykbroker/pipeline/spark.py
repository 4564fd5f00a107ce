"""The SparkSession pykbroker's pipelines and Spark tests run on.

The Kafka connector is Spark's own ``org.apache.spark:spark-sql-kafka-0-10_2.13`` for exactly the
installed PySpark version, resolved by Spark (``spark.jars.packages``, Ivy cache in the user's home)
from Maven Central: nothing in Spark or the connector is patched or configured for pykbroker.  The
settings below only keep Spark small on a laptop/CI box (local mode, two shuffle partitions, no UI,
everything on loopback).

PySpark is pinned to 4.0.0 (``pyproject.toml``): it is the newest 4.x whose connector *and* the
connector's ``spark-token-provider-kafka-0-10`` dependency are published on Maven Central; it runs
on Java 17 and bundles kafka-clients 3.9.0.
"""
from __future__ import annotations

import os
from typing import Any


def connector_package() -> str:
    import pyspark

    version = pyspark.__version__
    return "org.apache.spark:spark-sql-kafka-0-10_2.13:%s" % version


def build_session(app_name: str, master: str = "local[2]", conf: dict | None = None,
                  log_level: str = "ERROR") -> Any:
    """A SparkSession with the Kafka connector on the classpath.

    Local mode stays on loopback (``spark.driver.host``/``bindAddress``); the session time zone is
    UTC so window boundaries print the same everywhere.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings = {
        "spark.jars.packages": connector_package(),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.stopTimeout": "30s",
    }
    settings.update(conf or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark
