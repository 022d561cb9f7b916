"""One SparkSession for the whole session (``local[2]``).  It does NOT register the ``kafka_ha``
format: Spark finds it by itself through the ``pyspark_kafka_ha`` module that ``bin/install.sh``
puts on the virtualenv's path, as users get it (test_spark_options checks the explicit register).

Without pyspark/pyarrow (``pip install -e '.[spark]'``) every test module here skips itself
(``pytest.importorskip`` at its top).  Startup costs ~5 s, the first Python data-source query
another ~5 s (worker spawn); later queries are fast.
"""
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests.harness.spark_standalone import log4j_properties

LOG4J = log4j_properties("error")


@pytest.fixture(scope="session")
def spark():
    import pkgutil

    from pyspark.sql import SparkSession

    if not any(m.name == "pyspark_kafka_ha" for m in pkgutil.iter_modules()):
        pytest.fail("pyspark_kafka_ha is not on the path, so Spark cannot register "
                    "format('kafka_ha') by itself: run bash bin/install.sh")
    conf_dir = Path(tempfile.mkdtemp(prefix="kafka-ha-spark-conf-"))
    (conf_dir / "log4j2.properties").write_text(LOG4J)
    os.environ.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                      SPARK_LOCAL_IP="127.0.0.1", SPARK_CONF_DIR=str(conf_dir))
    session = (SparkSession.builder.master("local[2]").appName("kafka-ha-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    shutil.rmtree(conf_dir, ignore_errors=True)
