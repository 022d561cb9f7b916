"""Doctest collection of kafka_ha/spark needs pyspark and pyarrow: skip these modules without them."""
import importlib.util

collect_ignore_glob = []
if importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None:
    collect_ignore_glob = ["*.py"]
