#!/usr/bin/env bash
# kolo under a real one-host Slurm (Debian's slurm-wlm and munge), with no
# configuration: the master is the first host of SLURM_STEP_NODELIST and the
# port comes from the job and step ids. The test starts munged, slurmctld
# and slurmd itself, everything (config, key, state, pids, logs, ports)
# under a temporary directory, and stops them on exit. srun -n 4 of the C
# worker, of a Python script, and of PyTorch Lightning's Trainer on kolo
# against gloo, found by Lightning's own Slurm detection (4 tasks on a node
# declared with 4 CPUs); in the extended set also of a torch.distributed
# DDP script on the kolo backend and of a kolo.tensorflow program.
set -uo pipefail
# shellcheck source=tests/launchers/lib.sh
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/launchers/lib.sh"
for tool in munged slurmctld slurmd srun sinfo; do
  command -v "$tool" >/dev/null || PATH="$PATH:/usr/sbin"
  command -v "$tool" >/dev/null || { fail "no $tool (tools/setup.sh installs slurm-wlm and munge)"; finish srun_test; }
done
# slurmd starts tasks as their owner and keeps its spool as root: without
# root (or in a container that forbids it) the daemons cannot run here.
[ "$(id -u)" = 0 ] || skip "slurmd and munged need root to run a one-host cluster"

# Short: a unix socket's path must fit in 108 bytes.
D="$(mktemp -d /tmp/kolo-slurm.XXXXXX)"
mkdir -p "$D/state" "$D/spool" "$D/munge"
chmod 755 "$D" "$D/munge"
daemons=()
cleanup() {
  local pid
  for pid in "${daemons[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${daemons[@]}"; do wait "$pid" 2>/dev/null; done
  rm -rf "$WORK" "$D"
}
trap cleanup EXIT

# munge: a fresh key and a socket of our own.
dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$D/munge/munge.key"
SOCKET="$D/munge/munge.socket"
munged --foreground --force --key-file="$D/munge/munge.key" --socket="$SOCKET" \
  --pid-file="$D/munge/munged.pid" --log-file="$D/munge/munged.log" --seed-file="$D/munge/munged.seed" \
  >"$D/munged.out" 2>&1 &
daemons+=($!)
for _ in $(seq 1 100); do [ -S "$SOCKET" ] && break; sleep 0.05; done
if [ ! -S "$SOCKET" ]; then
  cat "$D/munged.out" "$D/munge/munged.log" 2>/dev/null | tail -5
  grep -qi -E "operation not permitted|permission denied" "$D/munged.out" "$D/munge/munged.log" 2>/dev/null &&
    skip "munged cannot start here: $(tail -1 "$D/munged.out")"
  fail "munged did not start"
  finish srun_test
fi

HOST=$(hostname -s)
export SLURM_CONF="$D/slurm.conf"
cat >"$SLURM_CONF" <<CONF
ClusterName=kolotest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)

SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=kolo Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
slurmctld -D -c -f "$SLURM_CONF" >"$D/slurmctld.out" 2>&1 &
daemons+=($!)
slurmd -D -f "$SLURM_CONF" >"$D/slurmd.out" 2>&1 &
daemons+=($!)
state=""
for _ in $(seq 1 300); do
  state=$(sinfo -h -o %T 2>/dev/null | head -1)
  [ "$state" = idle ] && break
  sleep 0.1
done
if [ "$state" != idle ]; then
  echo "node state: '$state'"
  tail -5 "$D/slurmctld.log" "$D/slurmd.log" "$D/slurmctld.out" "$D/slurmd.out" 2>/dev/null
  grep -qi -E "operation not permitted|permission denied" "$D/slurmd.log" "$D/slurmd.out" 2>/dev/null &&
    skip "slurmd cannot run here: $(grep -i -m1 -E 'operation not permitted|permission denied' "$D/slurmd.log" "$D/slurmd.out")"
  fail "the one-host cluster did not come up"
  finish srun_test
fi
echo "cluster up: node $HOST idle"

SRUN=(srun -n 4 --oversubscribe --time=2 --kill-on-bad-exit=1)
run_job "srun-c-4" 4 "rank %r ok" 120 "${SRUN[@]}" "$WORKER" 4
run_job "srun-python-4" 4 "python rank %r of 4 ok" 120 "${SRUN[@]}" "${PYRANK[@]}" 4
grep -q "local [0-3] of 4" "$WORK/srun-c-4.out" || fail "the local size from SLURM_STEP_TASKS_PER_NODE is not 4"
if [ ${#TORCH_RANK[@]} -gt 0 ]; then
  # Lightning finds the ranks itself (its SLURMEnvironment).
  lightning_on "srun-lightning-4" 4 srun -n 4 --ntasks-per-node 4 --oversubscribe --time=4 --kill-on-bad-exit=1
  # DDP and TensorFlow read the same environment as the jobs above (they
  # run under mpirun and torchrun in the default set).
  if extended; then
    run_job "srun-torch-4" 4 "torch rank %r of 4 ok" 180 "${SRUN[@]}" "${TORCH_RANK[@]}" 4 "$(free_port)"
    run_job "srun-tensorflow-4" 4 "tensorflow rank %r of 4 ok" 180 "${SRUN[@]}" "${TENSORFLOW_RANK[@]}" 4
  fi
else
  echo "srun-torch-4, srun-tensorflow-4: not in this pass (a sanitizer build: torch and TensorFlow run in the" \
    "optimized pass)"
fi
finish srun_test
