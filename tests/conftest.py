"""Shared test helpers: the Apache Hudi fixtures shipped in conformance/fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))   # test helpers (tests/support/)

from hudi_format.storage import SYNC_ENV  # noqa: E402
from conformance.fixtures import (EXPECTED, FIXTURES, TABLES, UNITS, expected,  # noqa: E402,F401
                                  extract_table, table_names)
from spark_jvm import TEST_JVM_OPTIONS  # noqa: E402

FIXTURE_TABLES = table_names()


def has_metadata_table(name: str) -> bool:
    """Whether fixture table ``name`` has a metadata table (read from its zip, not extracted)."""
    import zipfile
    with zipfile.ZipFile(TABLES / f"{name}.zip") as zf:
        return any(m.endswith(".hoodie/metadata/.hoodie/hoodie.properties") and "__MACOSX" not in m
                   for m in zf.namelist())

# The suite runs without fsync (PostgreSQL's test suites run with fsync=off): a sync is ~5 ms
# on CI's disks, a fifth of the write-heavy tests' time, and no test cuts the power: a killed
# process loses nothing the page cache holds. Set before any child process is started, so they
# inherit it; test_timeline_writer checks the syncs themselves with it on.
os.environ.setdefault(SYNC_ENV, "0")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Tests that talk to the S3 test server carry the ``s3`` marker (``-m "not s3"`` skips
    them), whichever module they are in. Called before pytest-xdist's own hook, which reads the
    ``xdist_group`` markers (after it, the group went unseen: each worker started a
    SparkSession and both JVMs ran Spark tests at once)."""
    for item in items:
        if "moto_s3" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.s3)
        if item.get_closest_marker("spark") is not None and "spark" in item.fixturenames:
            # one JVM for all tests on the session's SparkSession: under pytest-xdist (``-n 2
            # --dist loadgroup``) they share one worker. Spark tests without it (the cluster
            # test's JVMs are a child process's) run on either worker, off that longest chain.
            item.add_marker(pytest.mark.xdist_group("spark"))


@pytest.fixture(scope="session")
def fixture_tables(tmp_path_factory):
    """Lazily extracted fixture tables, one folder per table, shared by the whole session."""
    cache: dict[str, Path] = {}
    base = tmp_path_factory.mktemp("fixture_tables")

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = extract_table(name, base / name)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def moto_s3():
    """A real S3 API server on loopback (moto's server mode) for the whole session.

    Yields ``make_bucket(name) -> storage_options``: each test module takes its own bucket.
    ``make_bucket.requests`` lists every request the server answered (method, path, query).
    """
    import socket

    moto_server = pytest.importorskip("moto.server")
    s3fs = pytest.importorskip("s3fs")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    # every HTTP request the server answers, as (method, path, query): tests count round trips
    requests: list[tuple[str, str, str]] = []
    app = server._server.app

    def recording(environ, start_response):
        requests.append((environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", "")))
        return app(environ, start_response)

    server._server.app = recording
    options = {"key": "testing", "secret": "testing",
               "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}"}}

    def make_bucket(name: str) -> dict:
        s3fs.S3FileSystem(**options).mkdir(name)
        return dict(options)

    make_bucket.requests = requests  # type: ignore[attr-defined]
    try:
        yield make_bucket
    finally:
        server.stop()


def _java_home() -> str | None:
    """A Java 17+ for PySpark: ``JAVA_HOME``, else ``java`` on the PATH, else a JDK under
    /usr/lib/jvm (Debian's layout); ``None`` when there is none."""
    import os
    import shutil
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return home
    java = shutil.which("java")
    if java:
        return str(Path(os.path.realpath(java)).parent.parent)
    for candidate in sorted(Path("/usr/lib/jvm").glob("*"), reverse=True):
        if (candidate / "bin" / "java").exists():
            return str(candidate)
    return None


@pytest.fixture(scope="session")
def spark_java_home() -> str:
    """The Java home Spark runs with, here (:func:`spark`) or in a child process; skips
    without pyspark, fails without Java."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pandas")      # PySpark's mapInArrow insists on it
    java_home = _java_home()
    if java_home is None:
        pytest.fail("the Spark tests need Java 17: install it or set JAVA_HOME "
                    "(or leave them out with -m 'not spark')")
    return java_home


@pytest.fixture()
def codec_executors_refuse(monkeypatch) -> str:
    """A codec that passes the driver's option check and fails every Spark task that opens a
    base file with it, mid-write (as one an executor's pyarrow was built without would): only
    the driver's check is patched; the Python workers check it as shipped."""
    from hudi_format.options import registry
    name, real = "no-such-codec", registry.parse_choice

    def driver_check(key, value, allowed):
        if key == "hoodie.parquet.compression.codec" and value == name:
            return name
        return real(key, value, allowed)
    monkeypatch.setattr(registry, "parse_choice", driver_check)
    return name


@pytest.fixture(scope="session")
def spark(spark_java_home):
    """One local[2] SparkSession for every Spark test of the run, with ``hudi_format`` registered.

    A JVM and its Python workers take seconds to start; one session shared by all Spark test
    modules pays that once. Tuned for many small jobs on 2 cores: 2 shuffle partitions, no UI,
    UTC session time zone (what the tests' expected timestamps assume)."""
    import os
    os.environ.setdefault("JAVA_HOME", spark_java_home)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_adapter
    session = (SparkSession.builder.master("local[2]").appName("hudi_format tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "2g")
               .config("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS)
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    spark_adapter.register(session)
    yield session
    session.stop()
