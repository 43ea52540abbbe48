#!/usr/bin/env bash
# Runs a peer's rank bound to the cores kolorun would bind a kolo rank of
# the same place to (kolorun --bind-to auto), so that a peer can be
# measured under kolo's placement as well as under its own launcher's. The
# rule is kolorun's own (bindings/python/kolo/runner/supervisor.py's
# core_shares). The rank and the number of ranks: Open MPI's local ones
# under mpirun, else KOLO_RANK and KOLO_WORLD_SIZE (as run_peers.sh starts
# Gloo's ranks).
#   Usage: bench/peers/bind_like_kolorun.sh PROGRAM [ARGS...]
#          bench/peers/bind_like_kolorun.sh --binds N   (exit 0: kolorun binds N ranks here)
set -euo pipefail
RUNNER="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/bindings/python/kolo/runner"
# The cores of `rank` of `ranks` as kolorun would bind it, comma-separated; "" if unbound.
cores_of() {
  python3 -c "
import os, sys
sys.path.insert(0, sys.argv[1])
from supervisor import core_shares
shares = core_shares('auto', sorted(os.sched_getaffinity(0)), int(sys.argv[3]))
print(','.join(map(str, shares[int(sys.argv[2])])) if shares else '')" "$RUNNER" "$1" "$2"
}
if [[ ${1:-} == --binds ]]; then
  [[ -n $(cores_of 0 "$2") ]]
  exit
fi
cores=$(cores_of "${OMPI_COMM_WORLD_LOCAL_RANK:-${KOLO_RANK:-0}}" "${OMPI_COMM_WORLD_LOCAL_SIZE:-${KOLO_WORLD_SIZE:-1}}")
[[ -z $cores ]] && exec "$@"
exec taskset -c "$cores" "$@"
