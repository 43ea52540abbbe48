# shellcheck shell=bash
# What the shell tests share (sourced by tests/*.sh, which Bazel runs and
# tools/rdma_suite.sh runs again in its VM): counting failures, skipping,
# free ports, timing, kolorun jobs, and ranks of tests/mp_worker started by
# hand.
#
# A test that cannot run here (a privilege or a device it needs is missing)
# calls `skip REASON`: it prints "SKIPPED: REASON" and exits 0, since Bazel
# 4.2.3 has no skipped status. tools/test.sh finds that line in the test's
# log and counts the test as skipped, not passed.

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

skip() {
  echo "SKIPPED: $*"
  exit 0
}

# finish NAME: the closing line, and the exit status, from the failures.
finish() {
  if [ "$failures" = 0 ]; then echo "$1: all cases passed"; exit 0; fi
  echo "$1: $failures failure(s)"
  exit 1
}

# library_sanitizer LIB: "asan" or "tsan" when LIB is a sanitizer build
# (it needs that sanitizer's runtime: a program built with it, or the
# runtime preloaded into an uninstrumented one such as the interpreter),
# else nothing.
library_sanitizer() {
  local needed
  needed=$(readelf -d "$1") || return 1
  if grep -q 'NEEDED.*libasan' <<< "$needed"; then echo asan
  elif grep -q 'NEEDED.*libtsan' <<< "$needed"; then echo tsan
  fi
}

# Where tests keep what kolo compiles on first use (its TensorFlow kernels,
# its torch device backend): one folder for every test, and for later runs.
# Each build is named by a hash of its source, flags and framework version,
# so an edit makes a new one; a build takes 20-60 s of the 2 cores, once
# instead of once per test. Each build is under an flock (kolo/_native_build.py)
# that the end of its process drops. The build on first use into an empty
# folder is what wheel_test checks.
KOLO_TEST_BUILD_CACHE="${KOLO_TEST_BUILD_CACHE:-/tmp/kolo-test-build-cache-$(id -u)}"

# A free TCP port, chosen as kolo/runner/supervisor.py's free_port
# chooses: below the kernel's ephemeral range, where no test's outgoing
# connection takes it before the job binds it (bind to port 0 gives one
# from that range, and with tests running side by side one was taken so).
# Its interpreter runs without the caller's LD_PRELOAD: a sanitizer runtime
# preloaded for the tests' own processes crashes it.
free_port() {
  env -u LD_PRELOAD python3 -c '
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(64):
    port = random.SystemRandom().randrange(max(1024, low - 10000), low)
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        print(port)
        break
else:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
'
}

# seconds_since T DIGITS: the time since T (from `date +%s.%N`), rounded.
seconds_since() { env -u LD_PRELOAD python3 -c "import time; print(round(time.time() - $1, $2))"; }

# kolorun_job N TIMEOUT PROGRAM [ARG...]: runs PROGRAM on N ranks under
# tools/kolorun (ROOT is the runfiles' workspace); passes when it exits 0 and
# every rank printed "rank R ok", else fails showing the output's end.
kolorun_job() {
  local n=$1 timeout=$2 out rc oks
  shift 2
  out=$(python3 "$ROOT/tools/kolorun" -np "$n" --timeout "$timeout" "$@" 2>&1)
  rc=$?
  oks=$(echo "$out" | grep -cE "rank [0-9]+ ok$")
  if [ "$rc" -ne 0 ] || [ "$oks" -ne "$n" ]; then
    fail "$n ranks: exit $rc, $oks of $n ranks ok"
    echo "$out" | tail -30
  else
    echo "-- $n ranks: every rank ok"
  fi
}

# start_long_ranks N OUT [VAR=VALUE...]: starts ranks 0..N-1 of "$WORKER long"
# (allreduces until an error) in the background, with KOLO_RANK,
# KOLO_WORLD_SIZE and the given variables; rank r writes OUT.r and its pid
# goes to the array `pids`. If the caller defines rank_wrapper, rank r runs
# under the command that `rank_wrapper r` prints (e.g. ip netns exec HOST).
# Returns once every rank is in its loop (or after 10 s) and the
# collectives have run for a second.
start_long_ranks() {
  local n=$1 out=$2 r wrap=()
  shift 2
  pids=()
  for ((r = 0; r < n; r++)); do
    if declare -F rank_wrapper >/dev/null; then read -ra wrap <<<"$(rank_wrapper "$r")"; fi
    env KOLO_RANK="$r" KOLO_WORLD_SIZE="$n" "$@" "${wrap[@]}" "$WORKER" long >"$out.$r" 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 1 200); do
    [ "$(cat "$out".[0-$((n - 1))] 2>/dev/null | grep -c looping)" = "$n" ] && break
    sleep 0.05
  done
  sleep 1
}

# await_error LABEL PID OUT SINCE LIMIT_S: waits for a rank that must fail
# with KOLO_ERR_TIMEOUT or KOLO_ERR_PEER_LOST (the worker exits 10 + code:
# 13, 14) less than LIMIT_S seconds after SINCE; prints how it ended.
await_error() {
  local label=$1 pid=$2 out=$3 since=$4 limit=$5 rc took
  wait "$pid"
  rc=$?
  took=$(seconds_since "$since" 2)
  echo "$label exited $rc after ${took}s: $(grep 'failed' "$out" | head -1 | cut -c1-300)"
  case $rc in
    13|14) ;;
    *) fail "$label exited $rc, expected a timeout or peer-lost error"; cat "$out" ;;
  esac
  python3 -c "import sys; sys.exit(0 if $took < $limit else 1)" || fail "$label took ${took}s"
}
