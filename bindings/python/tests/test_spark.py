"""kolo on Spark, in local mode (Spark's own JVM on the machine's Java 17,
started by the test): kolo.spark.run and run_elastic with
horovod.spark.run's and run_elastic's semantics, and Spark's TorchDistributor on torch.distributed's "kolo" backend. Each
training reaches the weights one process reaches on the whole batch
(scripts/small_training.py)."""
import json
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "scripts"))
import small_training  # noqa: E402

pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession
    # The Python workers Spark starts import small_training and kolo as
    # this process does.
    os.environ["PYTHONPATH"] = os.pathsep.join([os.path.join(HERE, "scripts"), os.environ.get("PYTHONPATH", "")])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["KOLO_TIMEOUT_S"] = "30"
    session = (SparkSession.builder.master("local[2]").appName("kolo-test")
               .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def test_spark_run_trains_to_the_one_process_weights(spark):
    import kolo.spark
    results = kolo.spark.run(small_training.horovod_training, num_proc=2)
    want = small_training.one_process_weights()
    assert [r["rank"] for r in results] == [0, 1]  # rank order
    for r in results:
        assert (r["size"], r["local_size"], r["cross_size"]) == (2, 2, 1), r
        np.testing.assert_allclose(r["weights"], want, rtol=0, atol=1e-5)
    assert results[0]["weights"] == results[1]["weights"]


def test_spark_run_arguments_environment_and_output(spark):
    import io

    import kolo.spark

    def where(base, extra=0):
        print("rank %s says" % os.environ["KOLO_RANK"])
        print("two lines", file=sys.stderr)
        return base + extra, os.environ["KOLO_RANK"], os.environ["TRAINING_TAG"]
    out, err = io.StringIO(), io.StringIO()
    got = kolo.spark.run(where, args=(40,), kwargs={"extra": 2}, num_proc=2, env={"TRAINING_TAG": "t"}, verbose=0,
                         stdout=out, stderr=err)
    assert got == [(42, "0", "t"), (42, "1", "t")]
    # Each rank's output, prefixed with its rank, as horovod.spark.run forwards it.
    assert out.getvalue() == "[0]<stdout>:rank 0 says\n[1]<stdout>:rank 1 says\n"
    assert err.getvalue() == "[0]<stderr>:two lines\n[1]<stderr>:two lines\n"
    with pytest.raises(ValueError, match="num_proc must be at least 1"):
        kolo.spark.run(where, num_proc=-1)


def test_spark_run_that_cannot_start_times_out(spark):
    import threading
    import time

    import kolo.spark
    sc = spark.sparkContext

    def hold_a_slot():
        sc.setJobGroup("hold", "holds one of the 2 slots", interruptOnCancel=True)
        try:
            sc.parallelize([0], 1).map(lambda _: time.sleep(120)).collect()
        except Exception:
            pass  # cancelled below
    holder = threading.Thread(target=hold_a_slot)
    holder.start()
    time.sleep(2)
    start = time.monotonic()
    try:
        # 2 ranks need both slots at once: the barrier stage cannot start.
        with pytest.raises(TimeoutError, match="^Timed out waiting for Spark tasks to start. .*2 task slots did not all start within "
                                                 "start_timeout 5 s"):
            kolo.spark.run(small_training.horovod_training, num_proc=2, start_timeout=5)
        assert time.monotonic() - start < 30
    finally:
        sc.cancelJobGroup("hold")
        holder.join(timeout=60)
    assert kolo.spark.run(lambda: 7, num_proc=2, verbose=0) == [7, 7]  # the slots are free again


def test_spark_run_elastic_trains_to_the_one_process_weights(spark):
    import kolo.spark
    results = kolo.spark.run_elastic(small_training.elastic_training, num_proc=2, min_num_proc=1, max_num_proc=2,
                                     start_timeout=60, elastic_timeout=60, verbose=0)
    assert [r["rank"] for r in results] == [0, 1]  # rank order
    for r in results:
        assert r["size"] == 2
        np.testing.assert_allclose(r["weights"], small_training.one_process_weights(), rtol=0, atol=1e-5)


def _elastic_where(base, extra=0):
    import kolo.torch as hvd
    hvd.init()
    print("rank %d of %d says" % (hvd.rank(), hvd.size()))
    print("a line", file=sys.stderr)
    return base + extra, hvd.rank(), hvd.allgather(torch_tensor([hvd.rank()])).tolist(), os.environ["TRAINING_TAG"]


def torch_tensor(values):
    import torch
    return torch.tensor(values)


def _elastic_fails():
    import kolo.torch as hvd
    hvd.init()
    raise ValueError("a failing elastic function")


def test_spark_run_elastic_arguments_output_and_failures(spark):
    import io

    import kolo.spark
    out, err = io.StringIO(), io.StringIO()
    got = kolo.spark.run_elastic(_elastic_where, args=(40,), kwargs={"extra": 2}, num_proc=2, env={"TRAINING_TAG": "t"},
                                 stdout=out, stderr=err, start_timeout=60, verbose=0)
    assert got == [(42, 0, [0, 1], "t"), (42, 1, [0, 1], "t")]
    # Each worker's lines, prefixed with its task, as horovod.spark.run_elastic forwards them.
    assert sorted(line.split(":")[0] for line in out.getvalue().splitlines()) == ["[0]<stdout>", "[1]<stdout>"]
    assert sorted(line.split(":", 1)[1] for line in out.getvalue().splitlines()) == ["rank 0 of 2 says",
                                                                                      "rank 1 of 2 says"]
    assert sorted(err.getvalue().splitlines())[-2:] == ["[0]<stderr>:a line", "[1]<stderr>:a line"]
    # A worker that raises: its host (this machine, all of local mode's)
    # is blacklisted, the job fails and says why.
    with pytest.raises(RuntimeError, match="the job failed .*ValueError: a failing elastic function"):
        kolo.spark.run_elastic(_elastic_fails, num_proc=1, start_timeout=60, elastic_timeout=5, stderr=io.StringIO())
    with pytest.raises(ValueError, match="needs 1 <= min_num_proc <= num_proc <= max_num_proc, got 3, 2, 2"):
        kolo.spark.run_elastic(_elastic_fails, num_proc=2, min_num_proc=3)
    assert kolo.spark.run(lambda: 7, num_proc=2, verbose=0) == [7, 7]  # every task has ended: the slots are free


def test_torch_distributor_on_kolo(spark, tmp_path):
    from pyspark.ml.torch.distributor import TorchDistributor

    def train(out):
        result = small_training.torch_distributed_training()
        with open(os.path.join(out, "%d.json" % result["rank"]), "w") as f:
            json.dump(result, f)

    TorchDistributor(num_processes=2, local_mode=True, use_gpu=False).run(train, str(tmp_path))
    results = [json.loads((tmp_path / ("%d.json" % r)).read_text()) for r in range(2)]
    for r in results:
        assert r["size"] == 2
        np.testing.assert_allclose(r["weights"], small_training.one_process_weights(), rtol=0, atol=1e-5)
