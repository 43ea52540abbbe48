"""kolo.spark.run on a standalone Spark cluster the test starts on this
machine: a master and two workers of one core each (three JVMs, ended by
the test), so each rank is a task of its own executor, as on a cluster."""
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "scripts"))
import small_training  # noqa: E402

pyspark = pytest.importorskip("pyspark")
from kolo.runner.supervisor import free_port  # noqa: E402


def wait_for_port(port, proc, deadline_s, log):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the Spark master exited: " + log.read_text()[-2000:])
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError("the Spark master did not listen within %d s" % deadline_s)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from pyspark.sql import SparkSession
    logs = tmp_path_factory.mktemp("spark")
    spark_class = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_WORKER_DIR=str(logs), PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join([os.path.join(HERE, "scripts"), os.environ.get("PYTHONPATH", "")]),
               KOLO_TIMEOUT_S="30")
    port = free_port()
    procs = []

    def start(name, *args):
        log = logs / (name + ".log")
        procs.append(subprocess.Popen([spark_class] + list(args), env=env, stdout=log.open("w"),
                                      stderr=subprocess.STDOUT, start_new_session=True))
        return procs[-1], log
    try:
        master, log = start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                            str(port), "--webui-port", str(free_port()))
        wait_for_port(port, master, 90, log)
        for i in range(2):
            start("worker%d" % i, "org.apache.spark.deploy.worker.Worker", "spark://127.0.0.1:%d" % port,
                  "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()))
        os.environ.update({k: env[k] for k in ("PYTHONPATH", "PYSPARK_PYTHON", "KOLO_TIMEOUT_S")})
        session = (SparkSession.builder.master("spark://127.0.0.1:%d" % port).appName("kolo-cluster-test")
                   .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
                   .config("spark.executor.cores", "1").config("spark.executor.memory", "512m").getOrCreate())
        session.sparkContext.setLogLevel("ERROR")
        yield session
        session.stop()
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, 15)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait()


def test_spark_run_on_a_standalone_cluster(cluster):
    import kolo.spark
    results = kolo.spark.run(small_training.horovod_training, num_proc=2, start_timeout=120)
    assert [r["rank"] for r in results] == [0, 1]
    for r in results:
        np.testing.assert_allclose(r["weights"], small_training.one_process_weights(), rtol=0, atol=1e-5)
    assert results[0]["weights"] == results[1]["weights"]
