"""Spark 4's automatic registration of the ``kafka_ha`` format.

Spark looks, once per driver JVM, for top-level modules named ``pyspark_*`` on the
Python path (``pkgutil.iter_modules``) and registers the ``DefaultSource`` each one
exposes under ``DefaultSource.name()``.  This module lives outside ``kafka_ha/``
because it must be top-level; a wheel installs it as a module (setup.cfg
``py_modules``) and ``bin/install.sh`` puts its directory on the venv's path with a
``.pth`` file, since ``pkgutil`` does not see modules served by setuptools' editable finder.
"""
from kafka_ha.spark.source import KafkaHaDataSource as DefaultSource

__all__ = ["DefaultSource"]
