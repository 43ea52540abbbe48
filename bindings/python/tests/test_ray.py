"""kolo on Ray, on a local Ray instance the test starts (2 CPUs): Horovod's
RayExecutor (torch, TensorFlow and Keras programs) and ElasticRayExecutor
APIs (a job that grows and shrinks, one that loses a worker's actor), the
"kolo" ray.util.collective backend, and Ray Train's TorchTrainer on
torch.distributed's "kolo" backend. Each training reaches the weights one
process reaches on the whole batch (scripts/small_training.py)."""
import json
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "scripts"))
import small_training  # noqa: E402

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    # The workers import small_training and kolo as the driver does, and
    # find kolo's torch.backends entry point as an installed wheel offers it
    # (torch imports it: Ray Train's workers make the process group before
    # the training loop could import kolo.torch).
    installed = tmp_path_factory.mktemp("site")
    info = installed / "kolo-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kolo\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[torch.backends]\nkolo = _kolo_torch_backend:register\n")
    path = os.pathsep.join([os.path.join(HERE, "scripts"), str(installed), os.environ.get("PYTHONPATH", "")])
    # node:host-a and node:host-b: two "hosts" for ElasticRayExecutor on this one node.
    env_vars = {"PYTHONPATH": path, "KOLO_TIMEOUT_S": "30"}
    if "KOLO_TF_OPS_DIR" in os.environ:  # the tests' shared build of kolo's TensorFlow kernels
        env_vars["KOLO_TF_OPS_DIR"] = os.environ["KOLO_TF_OPS_DIR"]
    ray.init(num_cpus=2, resources={"node:host-a": 1, "node:host-b": 1}, include_dashboard=False, log_to_driver=True,
             runtime_env={"env_vars": env_vars})
    yield
    ray.shutdown()


def test_ray_executor_trains_to_the_one_process_weights(local_ray):
    from kolo.ray import RayExecutor
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_workers=2, cpus_per_worker=1)
    executor.start()
    try:
        results = executor.run(small_training.horovod_training)
        refs = executor.run_remote(lambda a, b=0: a + b, args=[40], kwargs={"b": 2})
        remote = ray.get(refs)
    finally:
        executor.shutdown()
    want = small_training.one_process_weights()
    assert [r["rank"] for r in results] == [0, 1]  # rank order
    for r in results:
        assert (r["size"], r["local_size"], r["cross_size"]) == (2, 2, 1), r
        np.testing.assert_allclose(r["weights"], want, rtol=0, atol=1e-5)
    assert results[0]["weights"] == results[1]["weights"]  # bit-identical across ranks
    assert remote == [42, 42]


def test_ray_executor_runs_tensorflow_and_keras_programs(local_ray):
    pytest.importorskip("tensorflow")
    from kolo.ray import RayExecutor
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=120), num_workers=2, cpus_per_worker=1)
    executor.start()
    try:
        results = {"tensorflow": executor.run(small_training.tensorflow_training),
                   "keras": executor.run(small_training.keras_training)}
    finally:
        executor.shutdown()
    want = small_training.one_process_weights()
    for framework, got in results.items():
        assert [(r["rank"], r["size"]) for r in got] == [(0, 2), (1, 2)], framework
        for r in got:
            np.testing.assert_allclose(r["weights"], want, rtol=0, atol=1e-5, err_msg=framework)


class Counter:
    """An executable class: each worker holds one."""

    def __init__(self, start):
        self.value = start

    def bump(self):
        self.value += 1
        return self.value


def test_ray_executor_executable_and_errors(local_ray):
    from kolo.ray import RayExecutor
    with pytest.raises(ValueError, match="num_workers, or num_hosts"):
        RayExecutor(RayExecutor.create_settings(), num_workers=2, num_hosts=1)
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_workers=2)
    with pytest.raises(RuntimeError, match="call start"):
        executor.run(print)
    executor.start(executable_cls=Counter, executable_args=[10], extra_env_vars={"TRAINING_TAG": "x"})
    try:
        assert executor.execute(lambda c: c.bump()) == [11, 11]
        assert executor.execute_single(lambda c: c.bump()) == 12
        assert executor.run(lambda: (os.environ["KOLO_RANK"], os.environ["TRAINING_TAG"])) == [("0", "x"),
                                                                                             ("1", "x")]
    finally:
        executor.shutdown()


@ray.remote(num_cpus=1)
class CollectiveWorker:
    def run(self, rank, world):
        import torch
        from ray.util import collective as col

        import kolo.ray.collective  # noqa: F401  (registers "kolo" in this actor)
        col.init_collective_group(world, rank, backend="kolo", group_name="g")
        a = np.full(5, rank + 1.0, dtype=np.float32)
        col.allreduce(a, group_name="g")
        t = torch.arange(4, dtype=torch.float64) * (rank + 1)
        col.allreduce(t, group_name="g", op=col.types.ReduceOp.MAX)
        gathered = [torch.zeros(3) for _ in range(world)]
        col.allgather(gathered, torch.full((3,), float(rank)), group_name="g")
        b = torch.full((2,), float(rank * 7))
        col.broadcast(b, src_rank=1, group_name="g")
        out = torch.zeros(2)
        col.reducescatter(out, [torch.full((2,), float(rank + i)) for i in range(world)], group_name="g")
        col.barrier(group_name="g")
        if rank == 0:
            col.send(torch.tensor([5.0, 6.0]), 1, group_name="g")
            got = None
        else:
            got = torch.zeros(2)
            col.recv(got, 0, group_name="g")
            got = got.tolist()
        col.destroy_collective_group("g")
        return a.tolist(), t.tolist(), [g.tolist() for g in gathered], b.tolist(), out.tolist(), got


def test_ray_collective_backend(local_ray):
    import kolo.ray.collective  # noqa: F401  (the driver registers it too, as Ray asks)
    workers = [CollectiveWorker.remote() for _ in range(2)]
    (a0, t0, g0, b0, o0, _), (a1, t1, g1, b1, o1, got) = ray.get([w.run.remote(r, 2) for r, w in enumerate(workers)],
                                                                 timeout=120)
    assert a0 == a1 == [3.0] * 5
    assert t0 == t1 == [0.0, 2.0, 4.0, 6.0]
    assert g0 == g1 == [[0.0] * 3, [1.0] * 3]
    assert b0 == b1 == [7.0, 7.0]
    assert o0 == [1.0, 1.0] and o1 == [3.0, 3.0]  # rank r: sum over ranks q of (q + r)
    assert got == [5.0, 6.0]


def test_ray_train_torch_trainer_on_kolo(local_ray, tmp_path):
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    out = tmp_path / "weights"
    out.mkdir()

    def loop():
        result = small_training.torch_distributed_training()
        (out / ("%d.json" % result["rank"])).write_text(json.dumps(result))

    trainer = TorchTrainer(loop, scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
                           torch_config=TorchConfig(backend="kolo"),
                           run_config=RunConfig(storage_path=str(tmp_path), name="kolo"))
    assert trainer.fit().error is None
    results = [json.loads((out / ("%d.json" % r)).read_text()) for r in range(2)]
    assert [r["size"] for r in results] == [2, 2]
    for r in results:
        np.testing.assert_allclose(r["weights"], small_training.one_process_weights(), rtol=0, atol=1e-5)


class _PlannedHosts:
    """A discovery that changes the hosts when the workers' logs say so:
    first `plan[0][1]`, then each next host set once a record matches the
    step's (step, size)."""

    def __init__(self, plan):
        self.plan, self.phase, self.records = plan, 0, []

    def __call__(self, record):  # the executor's callback: every worker's ray_logger record
        self.records.append(record)
        if self.phase + 1 < len(self.plan) and (record.get("step"), record.get("size")) == self.plan[self.phase + 1][0]:
            self.phase += 1

    def find_available_hosts_and_slots(self):
        return dict(self.plan[self.phase][1])


def test_elastic_ray_executor_grows_and_shrinks_to_the_one_process_weights(local_ray):
    """Hosts are Ray custom resources node:host-a and node:host-b on this
    one node: the job starts on host-a, host-b is added after step 5 (the
    worker there joins from the committed state), host-a is removed after
    step 15, and host-b's worker finishes alone, with one process's
    weights."""
    from kolo.ray import ElasticRayExecutor
    plan = _PlannedHosts([(None, {"host-a": 1}), ((5, 1), {"host-a": 1, "host-b": 1}), ((15, 2), {"host-b": 1})])
    settings = ElasticRayExecutor.create_settings(min_num_proc=1, max_num_proc=2, timeout_s=120, elastic_timeout=120)
    settings.discovery = plan
    executor = ElasticRayExecutor(settings, cpus_per_slot=1, override_discovery=False)
    executor.start()
    results = executor.run(lambda: small_training.elastic_training(holds=((5, 1), (15, 2))), callbacks=[plan])
    assert plan.phase == 2, plan.records
    assert len(results) == 1 and results[0]["size"] == 1, results
    np.testing.assert_allclose(results[0]["weights"], small_training.one_process_weights(), rtol=0, atol=1e-5)
    started = [r["pid"] for r in plan.records if "started" in r]
    finished = [r["pid"] for r in plan.records if "finished" in r]
    assert len(started) == 2 and len(finished) == 1, plan.records
    sizes = [r["size"] for r in plan.records if "step" in r]
    assert sizes[0] == 1 and 2 in sizes and sizes[-1] == 1, sizes


def test_elastic_ray_executor_settings_and_errors(local_ray):
    from kolo.ray import ElasticRayExecutor, RayHostDiscovery
    with pytest.raises(ValueError, match="gpus_per_slot is set but use_gpu is False"):
        ElasticRayExecutor(ElasticRayExecutor.create_settings(), gpus_per_slot=1)
    executor = ElasticRayExecutor(ElasticRayExecutor.create_settings(min_np=2, max_np=3))
    assert (executor.settings.min_num_proc, executor.settings.max_num_proc) == (2, 3)
    assert isinstance(executor.settings.discovery, RayHostDiscovery)
    with pytest.raises(RuntimeError, match="call start"):
        executor.run(lambda: 0)
    # This node's 2 CPUs are 2 slots of 1 CPU, 1 of 2, and none with a GPU.
    assert list(RayHostDiscovery(cpus_per_slot=1).find_available_hosts_and_slots().values()) == [2]
    assert list(RayHostDiscovery(cpus_per_slot=2).find_available_hosts_and_slots().values()) == [1]
    assert RayHostDiscovery(use_gpu=True).find_available_hosts_and_slots() == {}
    # A worker that raises fails the job, naming it.
    settings = ElasticRayExecutor.create_settings(min_num_proc=1, max_num_proc=1, timeout_s=60, elastic_timeout=5)
    failing = ElasticRayExecutor(settings, cpus_per_slot=1)
    failing.start()
    with pytest.raises(RuntimeError, match="the job failed .*ValueError: a failing training function"):
        failing.run(_raises)


def _raises():
    raise ValueError("a failing training function")


class _KillsRankOne:
    """A callback that kills rank 1's worker process (as a node lost with
    its actor) at its first record of step `step` in a job of 2."""

    def __init__(self, step):
        self.step, self.killed, self.records = step, None, []

    def __call__(self, record):
        self.records.append(record)
        if self.killed is None and (record.get("step"), record.get("size"), record.get("rank")) == (self.step, 2, 1):
            import signal
            os.kill(record["pid"], signal.SIGKILL)
            self.killed = record["pid"]


def test_elastic_ray_executor_goes_on_without_a_lost_worker(local_ray):
    """Rank 1's actor dies mid-training: its host is blacklisted, rank 0
    restores the last commit and finishes alone, with one process's
    weights."""
    from kolo.ray import ElasticRayExecutor

    class TwoHosts:
        def find_available_hosts_and_slots(self):
            return {"host-a": 1, "host-b": 1}

    settings = ElasticRayExecutor.create_settings(min_num_proc=1, max_num_proc=2, timeout_s=120, elastic_timeout=60)
    settings.discovery = TwoHosts()
    executor = ElasticRayExecutor(settings, cpus_per_slot=1, override_discovery=False)
    executor.start()
    killer = _KillsRankOne(step=5)
    results = executor.run(lambda: small_training.elastic_training(holds=((5, 2),)), callbacks=[killer])
    assert killer.killed is not None, killer.records
    assert len(results) == 1 and results[0]["size"] == 1, results
    np.testing.assert_allclose(results[0]["weights"], small_training.one_process_weights(), rtol=0, atol=1e-5)
