"""SparkSession creation for the pipeline.

Local mode by default; the same code runs on any cluster (``--master``, or a
session built by ``spark-submit``). The ``pipeline`` package itself, and
``lonnymq_dev`` (it imports lonnymq's limits from there), are shipped to the
executors with ``addPyFile`` (a zip made at start-up), so they can import them
wherever they run; only pyspark and psycopg 3 must be installed in their Python.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from pyspark.sql import SparkSession

import lonnymq_dev

PACKAGE_DIR = Path(__file__).resolve().parent
# The packages the executors import: this one and lonnymq_dev (whole, so that
# the zip cannot hide modules of it from a driver that imports it afterwards).
SHIPPED_PACKAGES = (PACKAGE_DIR, Path(lonnymq_dev.__file__).resolve().parent)
LOG4J_CONFIG = PACKAGE_DIR / "log4j2.properties"

DEFAULT_MASTER = "local[*]"


def _package_zip() -> Path:
    """pipeline/*.py and lonnymq_dev/*.py zipped into a temporary directory (removed at exit)."""
    tmp = Path(tempfile.mkdtemp(prefix="lonnymq-pipeline-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    path = tmp / "lonnymq_pipeline.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in SHIPPED_PACKAGES:
            for src in sorted(package.glob("*.py")):
                zf.write(src, f"{package.name}/{src.name}")
    return path


def get_spark(
    master: str | None = DEFAULT_MASTER,
    app_name: str = "lonnymq-pipeline",
    conf: dict[str, str] | None = None,
    *,
    quiet_logs: bool = True,
) -> SparkSession:
    """A SparkSession for the pipeline (or the active one, configured as asked).

    master: ``local[*]`` by default. ``local[N,F]`` retries a failed task up to
        F-1 times (plain ``local[N]`` never retries). None keeps whatever
        spark-submit or the environment chose.
    conf: extra Spark settings, e.g. ``{"spark.sql.shuffle.partitions": "4"}``.
    quiet_logs: a driver JVM started here logs errors only (pipeline/log4j2.properties).

    Settings made here (``conf`` overrides them): session time zone UTC
    (timestamps in message contents are written in UTC), no console progress
    bar (the pipeline prints its own progress), no web UI; and PYSPARK_PYTHON =
    this interpreter when unset. With a master: the PostgreSQL JDBC driver's
    jar (pipeline.export.jdbc_jar) added to spark.jars when it is there.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    settings = {
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",  # conf={"spark.ui.enabled": "true"} for the web UI
    }
    if quiet_logs and LOG4J_CONFIG.exists():
        settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}"
    settings.update(conf or {})
    if master:
        # export reads through the PostgreSQL JDBC driver. (Under spark-submit,
        # master None, --jars is the submitter's to give.)
        from .export import jars_with_jdbc_driver

        if jars := jars_with_jdbc_driver(settings.get("spark.jars")):
            settings["spark.jars"] = jars
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    sc = spark.sparkContext
    if quiet_logs:
        sc.setLogLevel("ERROR")
    if not getattr(sc, "_lonnymq_pipeline_shipped", False):
        sc.addPyFile(str(_package_zip()))
        sc._lonnymq_pipeline_shipped = True  # type: ignore[attr-defined]
    return spark
