"""PySpark (4.2+) data source for kafka-ha: ``spark.read/readStream/write/writeStream.format("kafka_ha")``.

Installed with ``bash bin/install.sh`` (or a wheel), Spark registers the format by itself
through the top-level ``pyspark_kafka_ha`` module (spark_plugin/).  Registering it
explicitly still works::

    from kafka_ha.spark import KafkaHaDataSource
    spark.dataSource.register(KafkaHaDataSource)

Needs ``pip install -e '.[spark]'`` (pyspark and pyarrow).  See docs/spark.md.
Importing this package does not import pyspark; the names below load it lazily.
"""

__all__ = ["KafkaHaDataSource", "register"]


def __getattr__(name):
    if name == "KafkaHaDataSource":
        from .source import KafkaHaDataSource
        return KafkaHaDataSource
    raise AttributeError(name)


def register(spark):
    """Register the ``kafka_ha`` format with ``spark`` (a SparkSession); returns the class."""
    from .source import KafkaHaDataSource
    spark.dataSource.register(KafkaHaDataSource)
    return KafkaHaDataSource
