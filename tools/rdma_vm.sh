#!/usr/bin/env bash
# Soft-RoCE in a virtual machine: this host's kernel has no InfiniBand
# support, so RDMA verbs code is tested against rdma_rxe inside a Debian 12
# guest under QEMU (TCG software emulation, no KVM needed).
#
#   tools/rdma_vm.sh build                   make the VM image (once; cached)
#   tools/rdma_vm.sh run [OPTIONS] -- CMD...  boot, run CMD, exit with its status
#   tools/rdma_vm.sh check [OPTIONS]         smoke test: rxe0 ACTIVE, ibv_rc_pingpong
#   tools/rdma_vm.sh probe                   can the VM run here? Installs the
#                                            host tools and builds the image if
#                                            need be, starts QEMU for a moment;
#                                            if anything fails, prints why (one
#                                            line) and exits 1
# OPTIONS: --timeout S (default 900) kills a run that outlives it (a guest
#          that has not booted in KOLO_RDMA_VM_BOOT_TIMEOUT s, default 180,
#          is stopped and booted once more);
#          --smp N (default 4) vCPUs: keep more than the processes that
#          busy-poll, or rxe's kernel work waits for a timer tick (~4 ms a
#          message; ibv_rc_pingpong: 8 ms an iteration at 2, 0.2 ms at 4).
#
# CMD runs as root in the repository root, which is shared read-write at the
# same absolute path ($HOME/.cache/bazel read-only too, so bazel-bin works).
# Its stdout and stderr both arrive on this script's stdout; the boot log
# and this script's own messages go to stderr. In the guest, eth0 is
# 10.0.2.15 and soft-RoCE device rxe0 (port 1) is ACTIVE; CMD's environment
# has KOLO_RDMA_DEV, KOLO_RDMA_GID (index of the RoCE v2 IPv4 GID),
# KOLO_RDMA_NETDEV and KOLO_RDMA_IP. Exit status: CMD's, 124 if the run
# timed out, 125 if the VM failed to get CMD going (the boot log says why).
# KOLO_RDMA_VM_CACHE (default /var/cache/kolo-rdma-vm) holds the image;
# delete it to rebuild. Needs root (debootstrap, and apt for the host tools)
# unless the tools are installed and the image is built.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
CACHE="${KOLO_RDMA_VM_CACHE:-/var/cache/kolo-rdma-vm}"
IMAGE="$CACHE/rootfs.ext4"
BAZEL_CACHE="${HOME:-/root}/.cache/bazel"

# What the guest needs: the kernel (it ships rdma_rxe; installing it makes
# the initramfs), the verbs stack and its tools, and the runtime libraries
# of what this host's g++ builds.
GUEST_PACKAGES=(
  linux-image-amd64 initramfs-tools kmod procps iproute2
  rdma-core ibverbs-utils ibverbs-providers libibverbs1 librdmacm1
  rdmacm-utils perftest
  libstdc++6 libgcc-s1 libbenchmark1debian python3
)

host_tools() {
  local p missing=()
  for p in qemu-system-x86 debootstrap debian-archive-keyring e2fsprogs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]})); then
    echo "rdma_vm: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    # Wait for, rather than fail on, another apt run holding the lock.
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# The Debian mirror this host's apt uses (one-line or deb822 sources).
mirror() {
  local m
  m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    grep -oE '^[[:space:]]*(deb[[:space:]]+(\[[^]]*\][[:space:]]+)?|URIs:[[:space:]]*)https?://[^[:space:]]+/debian/?([[:space:]]|$)' |
    grep -oE 'https?://[^[:space:]]+' | head -n1 || true)
  echo "${m:-http://deb.debian.org/debian}"
}

build() {
  host_tools
  [[ -f "$IMAGE" ]] && return 0
  local start=$SECONDS root="$CACHE/root.tmp"
  mkdir -p "$CACHE"
  # An interrupted debootstrap can leave /proc and /sys mounted in the tree.
  awk -v r="$root/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r | xargs -r umount -l
  rm -rf "$root"
  echo "rdma_vm: debootstrap bookworm from $(mirror) (a minute or more)" >&2
  local inc
  inc=$(IFS=,; echo "${GUEST_PACKAGES[*]}")
  debootstrap --variant=minbase --include="$inc" bookworm "$root" "$(mirror)" >"$CACHE/debootstrap.log" 2>&1 ||
    { tail -n 30 "$CACHE/debootstrap.log" >&2; exit 1; }
  echo kolo-rdma-vm >"$root/etc/hostname"
  printf '127.0.0.1 localhost\n::1 localhost\n' >"$root/etc/hosts"
  # PID 1 of the guest: mount this run's control folder and hand over to
  # the agent the host put there, so changing the agent needs no rebuild.
  cat >"$root/sbin/kolo-init" <<'EOF'
#!/bin/sh
modprobe -a 9pnet_virtio 9p
mkdir -p /run/kolo-ctl
mount -t 9p -o trans=virtio,version=9p2000.L kolo_ctl /run/kolo-ctl
exec /bin/bash /run/kolo-ctl/agent.sh
EOF
  chmod 755 "$root/sbin/kolo-init"
  cp "$root"/boot/vmlinuz-* "$CACHE/vmlinuz"
  cp "$root"/boot/initrd.img-* "$CACHE/initrd.img"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  # Sparse; the image is only ever booted with snapshot=on, so it never changes.
  mkfs.ext4 -q -F -L kolo-root -d "$root" "$IMAGE.tmp" 3G >/dev/null
  mv "$IMAGE.tmp" "$IMAGE"
  rm -rf "$root"
  echo "rdma_vm: image built in $((SECONDS - start)) s: $CACHE" >&2
}

# run_vm CMD...: boot the VM, run CMD in it, exit with its status.
run_vm() {
  build
  local ctl
  ctl=$(mktemp -d /tmp/kolo-rdma-vm.XXXXXX)
  trap 'rm -rf "$ctl"' EXIT
  cp "$HERE/rdma_vm/agent.sh" "$ctl/"
  printf '%q ' "$@" >"$ctl/cmd"
  local shares=(-virtfs "local,path=$ctl,mount_tag=kolo_ctl,security_model=none"
    -virtfs "local,path=$REPO,mount_tag=kolo_repo,security_model=none,multidevs=remap")
  printf 'REPO=%q\nBAZEL_CACHE=\n' "$REPO" >"$ctl/env"
  if [[ -d "$BAZEL_CACHE" ]]; then
    shares+=(-virtfs "local,path=$BAZEL_CACHE,mount_tag=kolo_bazel,security_model=none,multidevs=remap,readonly=on")
    printf 'BAZEL_CACHE=%q\n' "$BAZEL_CACHE" >>"$ctl/env"
  fi
  local start rc attempt qemu
  # A guest that has not reached its agent within boot_timeout s (it takes
  # 12-20 s under TCG) is stuck in its kernel's boot (seen: an RCU stall
  # 1.7 s in, which then sat out the whole run's timeout): QEMU is stopped
  # and the VM booted once more.
  for attempt in 1 2; do
    start=$SECONDS
    rc=0
    rm -f "$ctl/ready" "$ctl/status"
    # ttyS0 (kernel and agent log) goes to a file, ttyS1 (CMD) to stdout;
    # stdin from /dev/null keeps QEMU off the terminal. -no-reboot: the
    # agent's reboot, or a panic (panic=1), ends QEMU. --foreground leaves
    # QEMU in our process group, so Ctrl-C reaches it; timeout passes on
    # the TERM the watchdog sends it.
    timeout --foreground --kill-after=10 "$timeout" qemu-system-x86_64 \
      -accel tcg -cpu max -smp "$smp" -m 2G -nographic -nodefaults -no-reboot \
      -kernel "$CACHE/vmlinuz" -initrd "$CACHE/initrd.img" \
      -append "root=/dev/vda rw console=ttyS0 net.ifnames=0 panic=1 mitigations=off init=/sbin/kolo-init" \
      -drive "file=$IMAGE,if=virtio,format=raw,snapshot=on" \
      -netdev user,id=net0 -device virtio-net-pci,netdev=net0,romfile= \
      "${shares[@]}" \
      -monitor none -serial "file:$ctl/console.log" -serial stdio </dev/null &
    qemu=$!
    while [[ ! -f "$ctl/ready" ]] && kill -0 "$qemu" 2>/dev/null && ((SECONDS - start < boot_timeout)); do
      sleep 1
    done
    if [[ ! -f "$ctl/ready" ]] && kill -0 "$qemu" 2>/dev/null && ((attempt == 1)); then
      echo "rdma_vm: the guest did not boot in $boot_timeout s; booting it again. Its console's end:" >&2
      tail -n 5 "$ctl/console.log" >&2 || true
      kill "$qemu" 2>/dev/null || true
      wait "$qemu" || true
      continue
    fi
    wait "$qemu" || rc=$?
    break
  done
  if [[ -f "$ctl/status" ]]; then
    echo "rdma_vm: booted in $(cat "$ctl/ready") s, CMD exited $(cat "$ctl/status"), $((SECONDS - start)) s in all" >&2
    exit "$(cat "$ctl/status")"
  fi
  tail -n 40 "$ctl/console.log" >&2 || true
  if ((rc == 124 || rc == 137)); then
    echo "rdma_vm: timed out after $timeout s" >&2
    exit 124
  fi
  echo "rdma_vm: the VM ended (QEMU status $rc) without running CMD to completion" >&2
  exit 125
}

probe() {
  local err out rc dir
  err=$(mktemp)
  # A script of its own, so that `set -e` holds in it.
  if ! bash "${BASH_SOURCE[0]}" build 2>"$err"; then
    cat "$err" >&2
    out=$(grep -m1 '^E: ' "$err" || grep . "$err" | tail -n1)
    echo "cannot install the host tools or build the VM image (tools/rdma_vm.sh build: $out)"
    rm -f "$err"
    exit 1
  fi
  cat "$err" >&2
  rm -f "$err"
  # QEMU as run_vm starts it (TCG, its memory, a 9p share), paused (-S):
  # still running after 3 s means it can start.
  dir=$(mktemp -d)
  rc=0
  out=$(timeout 3 qemu-system-x86_64 -S -accel tcg -cpu max -m 2G -nographic -nodefaults -monitor none \
    -serial none -virtfs "local,path=$dir,mount_tag=probe,security_model=none" </dev/null 2>&1) || rc=$?
  rmdir "$dir"
  if ((rc != 124)); then
    echo "QEMU cannot start here (exit $rc: $(echo "$out" | grep . | head -n1))"
    exit 1
  fi
}

# The smoke test, run in the guest: the port is up and an RC ping-pong over
# RoCE v2 between two processes completes.
# shellcheck disable=SC2016  # expanded in the guest
CHECK='set -euo pipefail
ibv_devinfo -d "$KOLO_RDMA_DEV"
ibv_devinfo -d "$KOLO_RDMA_DEV" | grep -q PORT_ACTIVE
echo "RoCE v2 IPv4 GID index: $KOLO_RDMA_GID"
ibv_rc_pingpong -d "$KOLO_RDMA_DEV" -g "$KOLO_RDMA_GID" & server=$!
until ss -Hltn "sport = :18515" | grep -q .; do kill -0 "$server"; sleep 0.2; done
ibv_rc_pingpong -d "$KOLO_RDMA_DEV" -g "$KOLO_RDMA_GID" "$KOLO_RDMA_IP"
wait "$server"
echo "rdma_vm check: OK"'

usage() {
  sed -n '2,29p' "$0"
  exit 2
}

timeout=900
boot_timeout=${KOLO_RDMA_VM_BOOT_TIMEOUT:-180}
smp=4
cmd=${1:-}
(($#)) && shift
while [[ "${1:-}" == --?* ]]; do
  case "$1" in
    --timeout) timeout=$2 ;;
    --smp) smp=$2 ;;
    *) usage ;;
  esac
  shift 2
done
case "$cmd" in
  build) build ;;
  run) [[ "${1:-}" == -- ]] && shift; (($#)) || usage; run_vm "$@" ;;
  check) run_vm bash -c "$CHECK" ;;
  probe) probe ;;
  *) usage ;;
esac
