#!/usr/bin/env bash
# CI's part of PyTorch's own conformance suite for the kolo backend (torch
# 2.13's has 285 tests; run.sh runs all of them): every CPU collective's
# tests (allreduce, reduce, broadcast, allgather and its coalesced form,
# gather, scatter, barrier, send/recv, isend/irecv, recv from any source),
# DistributedDataParallel on CPU, Backend and destroy: 58 tests, about 3
# s each on 2 ranks (every test spawns its ranks). Left out: tests that
# need GPUs, objects pickling, timeouts, and those the suite would only skip
# here, by name (each still costs a spawn): the *_group tests that need 3+
# ranks, what the suite runs only for gloo, NCCL or on CUDA, and
# SyncBatchNorm's, which needs torchvision. run.sh runs them all.
# Runs against the optimized build only: a sanitizer build's library cannot
# be loaded into the ranks the suite spawns through multiprocessing without
# its runtime preloaded into every interpreter, which the suite does not do.
set -uo pipefail
ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
# shellcheck source=tests/lib/common.sh
. "$ROOT/tests/lib/common.sh"  # skip, library_sanitizer
export KOLO_LIBRARY="$ROOT/bindings/c/libkolo.so"
[ -n "$(library_sanitizer "$KOLO_LIBRARY")" ] &&
  skip "PyTorch's suite runs in the optimized pass (this is a sanitizer build of libkolo)"
export TORCH_SUITE_OUT="$TEST_TMPDIR/torch_suite"
export PYTHONDONTWRITEBYTECODE=1
export TORCH_SUITE_SELECT='all_reduce|broadcast|reduce|all_gather|gather|scatter|barrier|send_recv|isend|irecv|DistributedDataParallelCPU|Backend_enum|destroy|static_graph_api_cpu|any_source'
export TORCH_SUITE_EXCLUDE='cuda|multigpu|object|nccl|timeout|reduce_scatter|to_all|sparse|ddp_b|(?<!full)_group_(max|min|product|sum)$|^test_(all_gather|barrier|broadcast|gather|scatter)_group$|all_reduce_coalesced_(full_group_|group_)?(max|min|product|sum)$|all_gather_coalesced_group|monitored_barrier|batch_isend_irecv|ddp_hook_parity|accumulate_gradients_no_sync|skip_all_reduce_unused|SyncBatchNorm'
bash "$ROOT/tools/torch_suite/run.sh" kolo 2
status=$?
[ $status -ne 0 ] && cat "$TORCH_SUITE_OUT/pytest.log"
exit $status
