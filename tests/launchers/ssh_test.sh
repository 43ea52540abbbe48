#!/usr/bin/env bash
# kolorun across hosts over ssh, as a Horovod user launches from a login
# node: 3 emulated hosts (tools/netns.sh), each running its own sshd with a
# key made here, and on each a decoy interface `docker0` with the same
# address on every host (172.17.0.1, as Docker gives every machine) that
# carries the host's default route, so a guess by route would pick it. The
# job is started from inside host 0.
#  1. 2 hosts x 2 ranks, the C worker: every rank right, each host uses
#     eth0 and says docker0 was unreached; ranks that end at once succeed.
#  2. A hostfile of 3 hosts with 2, 1 and 1 slots, Python ranks: local and
#     cross ranks as Horovod defines them.
#  3. --network-interfaces docker0: refused, naming the interface and who
#     could not reach it; with a second network (eth1) on every host,
#     --network-interfaces eth0 and eth1,eth0 each run where they say; with
#     host 1's eth0 down and nothing forced, every host falls back to eth1.
#  4. --horovod: a Horovod program (import horovod.torch as hvd), unedited,
#     with horovodrun's tuning flags, the timeline and --output-filename;
#     kolo.run (horovod.run's API): a function as a job of 3 ranks on 2
#     hosts, its results and output back in rank order, then one that
#     raises on a remote rank: the error names rank and host.
#  5. A host whose sshd refuses, a host that is not there, a wrong key: a
#     clear error within --start-timeout naming the host; nothing left.
#  6. A rank killed on a remote host: the job ends everywhere with its
#     status, naming rank and host; Ctrl-C (SIGINT to kolorun): the same,
#     130; kolorun itself killed (SIGKILL): every host's ranks end.
#  7. A host's link goes down: its ssh and its supervisor notice within
#     about 20 s, the job ends, nothing is left on that host either.
#  8. Bad -H or hostfile: refused before anything starts, naming the entry.
#  9. An elastic job over ssh (kolo.torch.elastic): 2 hosts, a third added
#     by the discovery script, then the second removed; every epoch sees
#     every sample and the workers end with the same parameters; the
#     sockets ssh forwarded the driver to are removed.
# Needs root (namespaces, sshd); skips, saying why, where it cannot.
set -uo pipefail
# shellcheck source=tests/launchers/lib.sh
. "$TEST_SRCDIR/$TEST_WORKSPACE/tests/launchers/lib.sh"
NETNS="$ROOT/tools/netns.sh"
KOLORUN="$ROOT/tools/kolorun"
export KOLO_NETNS_PREFIX="ks$$-"
SSHD=/usr/sbin/sshd
[ -x "$SSHD" ] || skip "no $SSHD (Debian's openssh-server; tools/setup.sh installs it)"
why=$(bash "$NETNS" probe) || skip "$why"
[ -n "$SAN_PRELOAD" ] && skip "runs in the optimized pass"

trap 'bash "$NETNS" down; rm -rf "$WORK"' EXIT  # down ends the sshds too
bash "$NETNS" up 3 || exit 1
host() { echo "${KOLO_NETNS_PREFIX}h$1"; }
addr() { echo "10.77.0.$(($1 + 1))"; }
bash "$NETNS" sshd "$WORK" || fail "sshd on the hosts"
for i in 0 1 2; do
  # The decoy: a veth pair going nowhere, the same address on every host,
  # and the default route through it.
  ip netns exec "$(host "$i")" sh -c 'ip link add docker0 type veth peer name docker0p &&
    ip addr add 172.17.0.1/16 dev docker0 && ip link set docker0p up && ip link set docker0 up &&
    ip route add default dev docker0' || fail "decoy interface on host $i"
done
# A second network every host shares: a second bridge in the switch's
# namespace, eth1 on each host (10.78.0.<i+1>), so that two interfaces
# work and the choice between them is the launcher's.
SW="${KOLO_NETNS_PREFIX}sw"
ip -n "$SW" link add br1 type bridge && ip -n "$SW" link set br1 up || fail "second bridge"
for i in 0 1 2; do
  ip -n "$(host "$i")" link add eth1 type veth peer name "sy$i" && ip -n "$(host "$i")" link set "sy$i" netns "$SW" &&
    ip -n "$SW" link set "sy$i" master br1 && ip -n "$SW" link set "sy$i" up &&
    ip -n "$(host "$i")" addr add "10.78.0.$((i + 1))/24" dev eth1 && ip -n "$(host "$i")" link set eth1 up ||
    fail "eth1 on host $i"
done
# The client's settings (tools/netns.sh sshd wrote them): the key made
# there, and no known_hosts of the machine's own touched.
export KOLO_SSH_OPTIONS="-F $WORK/ssh_config"
# From host 0, as from a login node of the cluster.
ON0=(ip netns exec "$(host 0)")
A0=$(addr 0) A1=$(addr 1) A2=$(addr 2)
cd "$WORK" || exit 1

# The ranks of the failure cases are `sh -c "sleep 300; : MARK"`: the
# shell stays, MARK in its command line, its sleep in its process group.
# nothing_left MARK LABEL: no process of any host (all are this machine's)
# has MARK in its command line.
nothing_left() {
  local left
  sleep 0.5
  if left=$(pgrep -af "$1"); then
    fail "$2: processes left running: $left"
    pkill -KILL -f "$1"
  fi
}

# -- 1. two hosts, the C worker --------------------------------------------
run_job ssh-c-2x2 4 "rank %r ok" 120 "${ON0[@]}" "$KOLORUN" -np 4 -H "$A0:2,$A1:2" "$WORKER" 4
for a in "$A0" "$A1"; do
  grep -q "^kolorun: host $a uses eth0 ($a): reached from every other host.*docker0 172.17.0.1 unreached" \
    "$WORK/ssh-c-2x2.out" || fail "ssh-c-2x2: no line saying host $a uses eth0 and why"
done
grep -q "^\[2\] rank 2 of 4, local 0 of 2" "$WORK/ssh-c-2x2.out" || fail "ssh-c-2x2: rank 2 not local 0 of 2"
# Ranks that end at once: a host whose ranks are all done (and whose
# supervisor has ended) while another host is still starting is done, not
# lost.
for i in 1 2 3; do
  "${ON0[@]}" "$KOLORUN" -np 4 -H "$A0:2,$A1:2" true >"$WORK/quick.out" 2>&1 ||
    { fail "ranks that end at once (try $i): exit $?"; cat "$WORK/quick.out"; }
done

# -- 2. a hostfile of three hosts, Python ranks ------------------------------
printf '# three hosts\n%s slots=2\n%s slots=1   # one slot\n\n%s\n' "$A0" "$A1" "$A2" >"$WORK/hostfile"
run_job ssh-python-hostfile 4 "python rank %r of 4 ok" 120 "${ON0[@]}" "$KOLORUN" -np 4 --hostfile hostfile \
  "${PYRANK[@]}" 4
for want in "0 of 4 ok (local 0 of 2, cross 0 of 3)" "1 of 4 ok (local 1 of 2, cross 0 of 1)" \
  "2 of 4 ok (local 0 of 1, cross 1 of 3)" "3 of 4 ok (local 0 of 1, cross 2 of 3)"; do
  grep -qF "python rank $want" "$WORK/ssh-python-hostfile.out" ||
    fail "ssh-python-hostfile: no 'python rank $want'"
done

# -- 3. the interface, forced --------------------------------------------------
start=$(date +%s.%N)
"${ON0[@]}" "$KOLORUN" -np 2 -H "$A0:1,$A1:1" --network-interfaces docker0 "$WORKER" 2 >"$WORK/nic.out" 2>&1
rc=$?
echo "--network-interfaces docker0: exit $rc in $(seconds_since "$start" 1)s"
[ "$rc" = 1 ] || fail "--network-interfaces docker0: exit $rc, expected 1"
grep -q "^kolorun: host $A0: no interface reached from every other host (tried docker0 172.17.0.1: unreached from $A1)" \
  "$WORK/nic.out" || { fail "--network-interfaces docker0: no error naming docker0"; cat "$WORK/nic.out"; }
run_job ssh-nic-eth0 2 "rank %r ok" 60 "${ON0[@]}" "$KOLORUN" -np 2 -H "$A0:1,$A1:1" --network-interfaces eth0 \
  "$WORKER" 2
grep -q "^kolorun: host $A1 uses eth0 ($A1): .*in the order of --network-interfaces" "$WORK/ssh-nic-eth0.out" ||
  fail "ssh-nic-eth0: host $A1 does not say it uses eth0"
# Both networks work: the order given decides, and the ranks meet there.
run_job ssh-nic-eth1 2 "rank %r ok" 60 "${ON0[@]}" "$KOLORUN" -np 2 -H "$A0:1,$A1:1" \
  --network-interfaces eth1,eth0 sh -c 'echo "on $KOLO_IFNAME, rendezvous $KOLO_MASTER_ADDR"; exec "$0" 2' "$WORKER"
grep -q "^kolorun: host $A1 uses eth1 (10.78.0.2)" "$WORK/ssh-nic-eth1.out" &&
  grep -q "^\[1\] on eth1, rendezvous 10.78.0.1" "$WORK/ssh-nic-eth1.out" ||
  { fail "ssh-nic-eth1: the ranks were not told eth1 and rank 0's eth1 address"; cat "$WORK/ssh-nic-eth1.out"; }
# Host 1's eth0 down (kolorun reaches it on eth1): with nothing forced, the
# one network every host reaches is found and used.
bash "$NETNS" link-down 1
run_job ssh-nic-fallback 2 "rank %r ok" 60 "${ON0[@]}" "$KOLORUN" -np 2 -H "$A0:1,10.78.0.2:1" "$WORKER" 2
grep -q "^kolorun: host $A0 uses eth1 (10.78.0.1): .*eth0 10.77.0.1 unreached from 10.78.0.2" \
  "$WORK/ssh-nic-fallback.out" || { fail "ssh-nic-fallback: host $A0 did not fall back to eth1"; cat "$WORK/ssh-nic-fallback.out"; }
bash "$NETNS" link-up 1

# -- 4. a Horovod program, unedited ------------------------------------------
if [ ${#TORCH_RANK[@]} -gt 0 ]; then
  cat >"$WORK/horovod_program.py" <<'EOF'
import horovod.torch as hvd
import torch

hvd.init()
total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
assert total.item() == hvd.size() * (hvd.size() + 1) / 2, total
print("horovod rank %d of %d ok (%s)" % (hvd.rank(), hvd.size(), hvd.__name__), flush=True)
EOF
  # As a Horovod user types it, horovodrun's tuning flags and all: those
  # kolo has reach the ranks (rank 0 writes the timeline it was given),
  # --output-filename keeps each rank's output on its host, --autotune is
  # said and ignored.
  run_job ssh-horovod 2 "horovod rank %r of 2 ok (kolo.torch)" 120 "${ON0[@]}" "$KOLORUN" --horovod -np 2 \
    -H "$A0:1,$A1:1" --gloo --fusion-threshold-mb 32 --cycle-time-ms 1 --autotune \
    --timeline-filename "$WORK/timeline.json" --output-filename "$WORK/hvd-out" "$KOLO_PYTHON" horovod_program.py
  grep -q "^kolorun: --autotune: kolo has no autotuner" "$WORK/ssh-horovod.out" ||
    fail "ssh-horovod: --autotune not said"
  grep -q NEGOTIATING "$WORK/timeline.json" 2>/dev/null || fail "ssh-horovod: rank 0 wrote no timeline"
  for r in 0 1; do
    grep -qx "horovod rank $r of 2 ok (kolo.torch)" "$WORK/hvd-out/rank.$r/stdout" 2>/dev/null ||
      fail "ssh-horovod: no --output-filename file of rank $r"
  done
  # kolo.run: the function travels to the ranks in their environment, the
  # results and the output lines come back through kolorun.
  cat >"$WORK/function_job.py" <<'EOF'
import os
import sys

import kolo


def where(base):
    import kolo.torch as hvd
    import torch
    hvd.init()
    total = hvd.allreduce(torch.tensor([float(hvd.rank())]), op=hvd.Sum).item()
    print("rank %d says hello" % hvd.rank())
    return base + total, hvd.rank(), hvd.local_rank(), int(os.environ["GROUP_RANK"])  # GROUP_RANK: its host's index


def fails():
    import time
    if os.environ["KOLO_RANK"] == "2":
        raise ValueError("rank 2 fails")
    time.sleep(60)


a0, a1 = sys.argv[1:3]
got = kolo.run(where, args=(100,), np=3, hosts="%s:1,%s:2" % (a0, a1))
assert got == [(103.0, 0, 0, 0), (103.0, 1, 0, 1), (103.0, 2, 1, 1)], got
print("kolo.run results", got)
try:
    kolo.run(fails, np=3, hosts="%s:1,%s:2" % (a0, a1))
    sys.exit("kolo.run of a failing function did not raise")
except RuntimeError as e:
    print("kolo.run failure:", e)
EOF
  start=$(date +%s.%N)
  timeout 120 "${ON0[@]}" "$KOLO_PYTHON" "$WORK/function_job.py" "$A0" "$A1" >"$WORK/function_job.out" 2>&1 ||
    { fail "kolo.run: exit $?"; cat "$WORK/function_job.out"; }
  echo "kolo.run, twice: $(seconds_since "$start" 1)s"
  grep -q "^\[2\] rank 2 says hello" "$WORK/function_job.out" &&
    grep -q "^kolo.run failure: .*rank 2 on host $A1 exited with status 1" "$WORK/function_job.out" ||
    { fail "kolo.run: no rank 2 output, or the failure did not name rank 2 on $A1"; cat "$WORK/function_job.out"; }
  nothing_left "kolo.function_job" "kolo.run"
fi

# -- 5. hosts that do not start ----------------------------------------------
# expect_start_failure LABEL LIMIT_S PATTERN ARGS...: kolorun exits 1 within
# LIMIT_S with a line matching PATTERN, and leaves nothing running.
expect_start_failure() {
  local label=$1 limit=$2 pattern=$3 start rc took
  shift 3
  start=$(date +%s.%N)
  "${ON0[@]}" "$KOLORUN" "$@" sh -c 'sleep 300; : ssh-test-start' >"$WORK/$label.out" 2>&1
  rc=$?
  took=$(seconds_since "$start" 1)
  echo "$label: exit $rc in ${took}s"
  [ "$rc" = 1 ] || fail "$label: exit $rc, expected 1"
  awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t < l) }' || fail "$label: took ${took}s, over ${limit}s"
  grep -q "$pattern" "$WORK/$label.out" || { fail "$label: no line matching '$pattern'"; cat "$WORK/$label.out"; }
  nothing_left ssh-test-start "$label"
}
kill "$(cat "$WORK/sshd_2.pid")"
expect_start_failure ssh-refused 10 "^kolorun: host $A2: could not start kolo's supervisor (its ssh connection ended with status 255): ssh: connect to host $A2 port 22: Connection refused" \
  -np 3 -H "$A0:1,$A1:1,$A2:1"
expect_start_failure ssh-no-host 10 "^kolorun: host 10.77.0.9: could not start kolo's supervisor .*10.77.0.9" \
  -np 2 -H "$A0:1,10.77.0.9:1" --start-timeout 5
ssh-keygen -q -t ed25519 -N "" -f "$WORK/wrong_id"
printf 'Host *\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n' >"$WORK/ssh_config_no_key"
KOLO_SSH_OPTIONS="-F $WORK/ssh_config_no_key" expect_start_failure ssh-wrong-key 10 \
  "^kolorun: host $A1: could not start .*Permission denied (publickey" -np 2 -H "$A0:1,$A1:1" -i "$WORK/wrong_id"
# An sshd that accepts and then says nothing: --start-timeout (which is
# also ssh's own ConnectTimeout) ends the wait.
ip netns exec "$(host 2)" python3 -c '
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.77.0.3", 22)); s.listen(4); c = s.accept(); time.sleep(60)' &
mute_pid=$!
sleep 0.5
expect_start_failure ssh-silent 12 \
  "^kolorun: host $A2: \(did not start kolo's supervisor within --start-timeout 4 s\|could not start .*timed out\)" \
  -np 2 -H "$A0:1,$A2:1" --start-timeout 4
kill "$mute_pid" 2>/dev/null
bash "$NETNS" sshd "$WORK" 2

# -- 6. failures while running ------------------------------------------------
start=$(date +%s.%N)
"${ON0[@]}" "$KOLORUN" -np 4 -H "$A0:2,$A1:2" \
  sh -c '[ "$KOLO_RANK" = 3 ] && { sleep 1; kill -KILL $$; }; sleep 300; : ssh-test-kill' >"$WORK/kill.out" 2>&1
rc=$?
echo "remote rank killed: exit $rc in $(seconds_since "$start" 1)s"
[ "$rc" = 137 ] || fail "remote rank killed: exit $rc, expected 137"
grep -q "^kolorun: rank 3 on host $A1 exited with status 137; ending the job" "$WORK/kill.out" ||
  { fail "remote rank killed: no line naming rank 3 on $A1"; cat "$WORK/kill.out"; }
nothing_left ssh-test-kill "remote rank killed"

# in_background LABEL MARK: starts a 2x2 job of sleepers marked MARK, and
# waits until all 4 run.
in_background() {
  "${ON0[@]}" "$KOLORUN" -np 4 -H "$A0:2,$A1:2" sh -c "sleep 300; : $2" >"$WORK/$1.out" 2>&1 &
  job=$!
  for _ in $(seq 100); do
    [ "$(pgrep -fc "^sh -c sleep 300; : $2")" -ge 4 ] && return
    sleep 0.1
  done
  fail "$1: the 4 ranks did not start"
}
in_background ctrl-c ssh-test-int
pkill -INT -f "kolorun -np 4 -H $A0:2,$A1:2 sh -c sleep 300; : ssh-test-int"
wait "$job"
rc=$?
[ "$rc" = 130 ] || fail "Ctrl-C: exit $rc, expected 130"
grep -q "^kolorun: interrupted (SIGINT); ending the job" "$WORK/ctrl-c.out" || fail "Ctrl-C: no line saying so"
nothing_left ssh-test-int "Ctrl-C"

in_background kolorun-killed ssh-test-kill9
pkill -KILL -f "kolorun -np 4 -H $A0:2,$A1:2 sh -c sleep 300; : ssh-test-kill9"
{ wait "$job"; } 2>/dev/null  # (bash's own "Killed" line)
sleep 1  # each supervisor's SIGTERM, then its ranks' exit
nothing_left ssh-test-kill9 "kolorun killed"

# -- 7. a host's link goes down -------------------------------------------------
in_background link-down ssh-test-link
start=$(date +%s.%N)
bash "$NETNS" link-down 1
wait "$job"
rc=$?
took=$(seconds_since "$start" 1)
echo "link down: exit $rc in ${took}s"
[ "$rc" = 1 ] || fail "link down: exit $rc, expected 1"
awk -v t="$took" 'BEGIN { exit !(t < 40) }' || fail "link down: took ${took}s"
grep -q "^kolorun: host $A1: lost (its ssh connection ended with status 255)" "$WORK/link-down.out" ||
  { fail "link down: no line naming host $A1"; cat "$WORK/link-down.out"; }
sleep 2  # the cut-off host's supervisor counts 15 s of silence from its last heartbeat
nothing_left ssh-test-link "link down"
bash "$NETNS" link-up 1

# -- 8. bad host lists ----------------------------------------------------------
bad_hosts() {
  local label=$1 pattern=$2
  shift 2
  "$KOLORUN" "$@" sh -c 'echo a rank ran' >"$WORK/$label.out" 2>&1
  rc=$?
  [ "$rc" = 2 ] || fail "$label: exit $rc, expected 2"
  grep -q "a rank ran" "$WORK/$label.out" && fail "$label: a rank ran"
  grep -qF -- "$pattern" "$WORK/$label.out" || { fail "$label: no '$pattern'"; cat "$WORK/$label.out"; }
}
bad_hosts bad-slots "-H: 'a:x': slots must be a whole number of at least 1, got 'x'" -np 2 -H a:x
bad_hosts too-many "-np 5 is more ranks than the 4 slots of a:2,b:2" -np 5 -H a:2,b:2
bad_hosts twice "-H: host a is listed twice" -H a:2,a:1
printf 'a slots=2\nb slots=two\n' >"$WORK/bad_hostfile"
bad_hosts bad-hostfile "--hostfile $WORK/bad_hostfile line 2: 'b slots=two': slots must be" --hostfile "$WORK/bad_hostfile"
bad_hosts no-hostfile "--hostfile $WORK/none: No such file or directory" --hostfile "$WORK/none"

# -- 9. an elastic job over ssh ------------------------------------------------
if [ ${#TORCH_RANK[@]} -gt 0 ]; then
  printf '%s:1\n%s:1\n' "$A0" "$A1" >"$WORK/elastic_hosts"
  printf '#!/bin/sh\ncat %s\n' "$WORK/elastic_hosts" >"$WORK/discover.sh"
  chmod +x "$WORK/discover.sh"
  logins_before=$(grep -c "Accepted publickey" "$WORK/sshd_2.log")
  start=$(date +%s.%N)
  KOLO_TIMEOUT_S=10 ELASTIC_HOSTS_FILE="$WORK/elastic_hosts" ELASTIC_ADD="$A2:1@1" ELASTIC_DROP="$A1@2" \
    ELASTIC_STEP_S=0.1 timeout 200 "${ON0[@]}" "$KOLORUN" -np 2 --min-np 1 --max-np 3 \
    --host-discovery-script "$WORK/discover.sh" --discovery-interval 0.3 \
    "$KOLO_PYTHON" "$ROOT/bindings/python/tests/scripts/elastic_training.py" >"$WORK/elastic.out" 2>&1
  rc=$?
  echo "elastic over ssh: exit $rc in $(seconds_since "$start" 1)s"
  [ "$rc" = 0 ] || { fail "elastic over ssh: exit $rc"; tail -30 "$WORK/elastic.out"; }
  [ "$(grep -c "Accepted publickey" "$WORK/sshd_2.log")" -gt "$logins_before" ] ||
    fail "elastic over ssh: the added host's worker did not start over ssh"
  grep -q "version [0-9]*: 3 worker(s): $A0:0, $A1:0, $A2:0" "$WORK/elastic.out" ||
    fail "elastic over ssh: no version with the added host"
  grep -q "version [0-9]*: 2 worker(s): $A0:0, $A2:0" "$WORK/elastic.out" ||
    fail "elastic over ssh: no version without the removed host"
  for e in 0 1 2; do
    grep -q "epoch $e: \([0-9]*\) of \1 samples processed" "$WORK/elastic.out" ||
      fail "elastic over ssh: epoch $e did not see every sample once"
  done
  digests=$(grep -o "done: epochs 3, commits [0-9]*, parameters [0-9a-f]*" "$WORK/elastic.out" | sort -u | wc -l)
  [ "$digests" = 1 ] || { fail "elastic over ssh: workers disagree on their parameters"; grep "done:" "$WORK/elastic.out"; }
  # The remote workers reached the driver through sockets ssh forwarded
  # (/tmp/kolo-driver-*.sock, every host's /tmp being this machine's): each
  # removed by its supervisor.
  left=$(ls /tmp/kolo-driver-*.sock 2>/dev/null)
  [ -z "$left" ] || { fail "elastic over ssh: forwarded sockets left: $left"; rm -f $left; }
fi

finish ssh_test
