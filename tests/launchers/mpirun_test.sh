#!/usr/bin/env bash
# kolo under Debian's real Open MPI mpirun, with nothing passed: every rank
# is on this host, so the master is 127.0.0.1 and the port comes from the
# job id. 2 ranks of the C worker and of a Python script (and 4 in the
# extended set); 3 ranks of a torch.distributed DDP script on the kolo
# backend and of an mpi4py one (and of a kolo.tensorflow one in the
# extended set).
set -uo pipefail
# shellcheck source=tests/launchers/lib.sh
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/launchers/lib.sh"
command -v mpirun >/dev/null || { fail "no mpirun (tools/setup.sh installs openmpi-bin)"; finish mpirun_test; }
trap 'rm -rf "$WORK"' EXIT
export TMPDIR="$WORK"  # Open MPI's session directory

MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
sizes=(2)
extended && sizes+=(4)  # the torch and mpi4py jobs below take 3
for n in "${sizes[@]}"; do
  run_job "mpirun-c-$n" "$n" "rank %r ok" 120 "${MPIRUN[@]}" -np "$n" "$WORKER" "$n"
  run_job "mpirun-python-$n" "$n" "python rank %r of $n ok" 120 "${MPIRUN[@]}" -np "$n" "${PYRANK[@]}" "$n"
done
# The explicit form, for ranks on several hosts: -x KOLO_MASTER_ADDR/PORT.
run_job "mpirun-c-explicit-2" 2 "rank %r ok" 120 "${MPIRUN[@]}" -np 2 -x KOLO_MASTER_ADDR=127.0.0.1 \
  -x KOLO_MASTER_PORT="$(free_port)" "$WORKER" 2
# torch.distributed on the kolo backend, DDP against gloo in the same job.
# mpi4py: the job's id through MPI.COMM_WORLD.bcast, kolo's allreduce against
# MPI's on the same arrays (optimized pass, with the torch job).
if [ ${#TORCH_RANK[@]} -gt 0 ]; then
  run_job "mpirun-torch-3" 3 "torch rank %r of 3 ok" 180 "${MPIRUN[@]}" -np 3 "${TORCH_RANK[@]}" 3 "$(free_port)"
  run_job "mpirun-mpi4py-3" 3 "mpi4py rank %r of 3 ok" 120 "${MPIRUN[@]}" -np 3 "$KOLO_PYTHON" \
    "$ROOT/tests/launchers/mpi4py_job.py"
  # TensorFlow starts as under torchrun (the default set runs it there).
  extended &&
    run_job "mpirun-tensorflow-3" 3 "tensorflow rank %r of 3 ok" 180 "${MPIRUN[@]}" -np 3 "${TENSORFLOW_RANK[@]}" 3
else
  echo "mpirun-torch-3, mpirun-tensorflow-3: not in this pass (a sanitizer build: torch and TensorFlow run" \
    "in the optimized pass)"
fi
finish mpirun_test
