#!/usr/bin/env bash
# Installs every Debian package kolo needs to build, test and benchmark.
# Idempotent: packages already present are skipped, so it is cheap to run
# before every build (the README commands and .ci/run do exactly that).
set -euo pipefail

PACKAGES=(
  bazel-bootstrap          # the build (Bazel 4.2.3, works offline)
  g++ libboost-dev         # compiler, Boost.Asio (header-only)
  libgtest-dev libgmock-dev libbenchmark-dev
  libssl-dev               # OpenSSL's libcrypto: the handshake's HMAC, and KOLO_ENCRYPT's HKDF and AES-GCM
  libibverbs-dev           # the RDMA verbs transport (rdma-core)
  libgloo-dev              # peer for the comparison benchmark
  openmpi-bin libopenmpi-dev  # peer for the latency comparison
  python3                  # kolorun (Debian's /usr/bin/python3)
  python3-numpy            # kolo's Python package under Debian's interpreter (tests/install_test.sh)
  python3-pip python3-setuptools python3-wheel python3-venv pkg-config  # pip install ./bindings/python, kolo.pc (tools/install.sh, tests/install_test.sh)
  python3-dev              # Python's headers: torch compiles C++ against them (torch.compile's Inductor, kolo/torch/_device_backend.cpp)
  clang libclang-rt-14-dev # libFuzzer targets (tools/fuzz.sh)
  gnuplot-nox              # kolo_bench --plot
  iproute2 procps iptables # emulated hosts (tools/netns.sh)
  tcpdump                  # what an encrypted job puts on the wire (tests/encrypt_test.sh)
  openssh-server           # each emulated host's sshd, for kolorun -H across hosts (tests/launchers/ssh_test.sh)
  slurm-wlm munge          # a one-host Slurm cluster for the srun launcher test (tests/launchers/srun_test.sh)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Python environment every Python test, benchmark and example runs in
# (tools/python_env.sh), and the checkout's .venv pointing at it.
# shellcheck source=tools/python_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/python_env.sh"
kolo_python_env_make
ln -sfn "$KOLO_VENV" "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv"
