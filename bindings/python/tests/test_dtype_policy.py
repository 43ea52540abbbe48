"""Every front end of kolo accepts and refuses the same reductions: for each
dtype, op and reduction (dtype_policy_paths's cases), kolo on NumPy arrays,
kolo.torch, torch.distributed on backend "kolo" and kolo.tensorflow each
either return the values of a NumPy reference or raise kolo._policy's
error, word for word. Here as a world of one rank, in pytest's process;
then on two ranks started rank by rank, where sums wrap, averages
truncate and bool's or and and meet values that differ."""
import os

import numpy as np
import pytest
import tensorflow as tf
import torch
import torch.distributed as dist

import kolo
import kolo.tensorflow as kolo_tf
import kolo.torch as kolo_torch
from dtype_policy_paths import (CASES, DTYPES, NOT_REDUCED, OPS, PATHS, accepted, array_of, check, inputs,
                                reference, tensor_of)
from kolo import _policy
from rank_by_rank import finish, free_port, start

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "scripts", "dtype_policy_job.py")


@pytest.fixture(scope="module", autouse=True)
def world_of_one():
    kolo.init()  # no launcher: a world of one
    dist.init_process_group("kolo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()
    kolo.shutdown()


def test_the_policy_reduces_what_kolo_promises():
    assert sorted(_policy.DTYPES) == sorted(d for d in DTYPES if d not in NOT_REDUCED)
    assert sorted(_policy.OP_NAMES.values()) == sorted(OPS)
    for collective, dtype, op in CASES:
        try:
            _policy.reduction(dtype, getattr(_policy, op), collective)
            taken = True
        except (_policy.DtypeRefusedError, _policy.OpRefusedError) as e:
            taken = False
            assert collective in str(e) and (dtype in str(e) or op in str(e)), e
        assert taken == accepted(collective, dtype, op), (collective, dtype, op)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
@pytest.mark.parametrize("case", CASES, ids="-".join)
def test_every_path_on_one_rank(path, case):
    if not check(path, *case, rank=0, size=1):
        pytest.skip("%s has no %s" % (path.name, case[2]))


def test_every_path_on_two_ranks():
    kolo_port, torch_port = free_port(), free_port()
    lines, codes, out = finish(start(JOB, lambda r: [r, 2, kolo_port, torch_port], 2, KOLO_TIMEOUT_S="20"))
    checked = sum(getattr(p, "expressible", lambda op: True)(op) for p in PATHS for _, _, op in CASES)
    assert lines == {0: "ok %d" % checked, 1: "ok %d" % checked} and codes == [0, 0], out


@pytest.mark.parametrize("dtype", ["bool", "int16", "complex64"])
def test_scale_factors_are_refused_alike_for_bool_only(dtype):
    x = inputs(0, dtype)
    op = "Max" if dtype == "bool" else "Sum"
    runs = {"numpy": lambda: kolo.allreduce(x, op=getattr(kolo, op), postscale_factor=2.0),
            "torch": lambda: array_of(kolo_torch.allreduce(tensor_of(x), op=getattr(kolo_torch, op),
                                                           postscale_factor=2.0)),
            "tensorflow": lambda: kolo_tf.allreduce(tf.constant(x), op=getattr(kolo_tf, op),
                                                    postscale_factor=2.0).numpy()}
    for name, run in runs.items():
        if dtype == "bool":
            with pytest.raises(_policy.DtypeRefusedError) as e:
                run()
            assert str(e.value) == ("allreduce: kolo reduces bool tensors as logical or (Sum, Max) and and (Min, "
                                    "Product), which take no prescale or postscale factor"), name
        else:
            got = run()
            assert got.dtype == x.dtype, name
            np.testing.assert_array_equal(got, (x.astype(np.complex128 if dtype == "complex64" else np.int64) * 2)
                                          .astype(x.dtype), err_msg=name)


@pytest.mark.filterwarnings("ignore:`torch.distributed.all_reduce_coalesced` will be deprecated:FutureWarning")
@pytest.mark.parametrize("dtype", ["bool", "int16", "uint16", "complex128"])
def test_grouped_and_coalesced_forms_take_them_too(dtype):
    op = "Max" if dtype == "bool" else "Sum"
    x, want = inputs(0, dtype), reference("allreduce", dtype, op, 0, 1)
    outputs = {
        "numpy": kolo.grouped_allreduce([x, x], op=getattr(kolo, op)),
        "torch": [array_of(t) for t in kolo_torch.grouped_allreduce([tensor_of(x)] * 2, op=getattr(kolo_torch, op))],
        "torch reducescatter": [array_of(t) for t in kolo_torch.grouped_reducescatter(
            [tensor_of(x)] * 2, op=getattr(kolo_torch, op))],
        "tensorflow": [t.numpy() for t in kolo_tf.grouped_allreduce([tf.constant(x)] * 2, op=getattr(kolo_tf, op))],
        "tensorflow reducescatter": [t.numpy() for t in kolo_tf.grouped_reducescatter(
            [tf.constant(x)] * 2, op=getattr(kolo_tf, op))],
        # In a graph: the casts and pairs are TensorFlow ops around kolo's.
        "tensorflow graph": [t.numpy() for t in tf.function(lambda: kolo_tf.grouped_allreduce(
            [tf.constant(x)] * 2, op=getattr(kolo_tf, op)))()],
    }
    coalesced = [tensor_of(x), tensor_of(x)]
    dist.all_reduce_coalesced(coalesced, dist.ReduceOp.MAX if dtype == "bool" else dist.ReduceOp.SUM)
    outputs["torch.distributed coalesced"] = [array_of(t) for t in coalesced]
    for name, got in outputs.items():
        for g in got:
            assert g.dtype == want.dtype, name
            np.testing.assert_array_equal(g, want, err_msg=name)


def test_the_torch_backend_reduces_non_contiguous_and_conjugated_views():
    base = torch.from_numpy(inputs(0, "complex64"))
    view = base.clone().t()  # strided: reduced through a copy written back
    dist.all_reduce(view)
    assert torch.equal(view, base.t())
    conjugated = base.conj()  # its memory is not its value (torch's all_reduce refuses it; reduce takes it)
    dist.reduce(conjugated, 0)
    assert torch.equal(conjugated.resolve_conj(), torch.from_numpy(inputs(0, "complex64")).conj())
    narrow = torch.from_numpy(inputs(0, "int16")).t()
    dist.all_reduce(narrow, dist.ReduceOp.SUM)
    assert torch.equal(narrow, torch.from_numpy(inputs(0, "int16")).t())


def test_unknown_ops_are_refused_alike():
    message = "allreduce: unknown reduction op 17; use Average, Sum, Adasum, Min, Max or Product"
    x = np.ones(3, np.float32)
    for run in (lambda: kolo.allreduce(x, op=17), lambda: kolo_torch.allreduce(torch.ones(3), op=17),
                lambda: kolo_tf.allreduce(tf.ones([3]), op=17)):
        with pytest.raises(_policy.OpRefusedError, match="^%s$" % message):
            run()
    with pytest.raises(_policy.OpRefusedError, match="^allreduce: unknown reduction op BAND; use"):
        dist.all_reduce(torch.ones(3, dtype=torch.int32), dist.ReduceOp.BAND)
