#!/bin/bash
# PID 1 of the soft-RoCE VM (tools/rdma_vm.sh): /sbin/kolo-init in the image
# mounted this run's control folder at /run/kolo-ctl and execs this copy.
# Mounts the shared repository, brings up rxe0 on the NIC, runs the host's
# command (ctl/cmd) with its output on ttyS1, and leaves its exit status in
# ctl/status. Never exits (PID 1 exiting panics the kernel): it reboots,
# which QEMU's -no-reboot turns into QEMU exiting.
set -uo pipefail
CTL=/run/kolo-ctl
# shellcheck source=/dev/null
. "$CTL/env"

reboot_now() { echo b >/proc/sysrq-trigger; sleep infinity; }
fail() {
  echo "agent: $*" >/dev/console
  reboot_now
}

mount -t tmpfs tmpfs /tmp || fail "tmpfs"
# As on any Debian machine: ranks of the VM share memory (transport_choice_test).
mkdir -p /dev/shm && mount -t tmpfs -o mode=1777 tmpfs /dev/shm || fail "tmpfs on /dev/shm"
ip link set lo up
p9="trans=virtio,version=9p2000.L,msize=512000"
mkdir -p "$REPO" && mount -t 9p -o "$p9" kolo_repo "$REPO" || fail "cannot mount $REPO"
if [[ -n "$BAZEL_CACHE" ]]; then
  mkdir -p "$BAZEL_CACHE" && mount -t 9p -o "$p9,ro" kolo_bazel "$BAZEL_CACHE" || fail "cannot mount $BAZEL_CACHE"
fi

modprobe -a virtio_net rdma_rxe || fail "modprobe"
# The one NIC; net.ifnames=0 on the kernel command line keeps it eth0.
nic=
for d in /sys/class/net/*; do
  [[ -e "$d/device" ]] && nic=${d##*/} && break
done
[[ -n "$nic" ]] || fail "no NIC"
# QEMU's user-mode network: the guest is 10.0.2.15, the gateway 10.0.2.2.
ip addr add 10.0.2.15/24 dev "$nic" && ip link set "$nic" up &&
  ip route add default via 10.0.2.2 || fail "cannot configure $nic"
rdma link add rxe0 type rxe netdev "$nic" || fail "rdma link add"

# Wait for the port to go ACTIVE and the RoCE v2 GID of the IPv4 address
# to appear; the GID table's order is the kernel's, so look the index up.
port=/sys/class/infiniband/rxe0/ports/1
gid=
for _ in $(seq 150); do
  if ibv_devinfo -d rxe0 | grep -q PORT_ACTIVE; then
    for t in "$port"/gid_attrs/types/*; do
      i=${t##*/}
      if [[ "$(cat "$t" 2>/dev/null)" == "RoCE v2" && "$(cat "$port/gids/$i")" == 0000:0000:0000:0000:0000:ffff:* ]]; then
        gid=$i
        break
      fi
    done
    [[ -n "$gid" ]] && break
  fi
  sleep 0.2
done
[[ -n "$gid" ]] || fail "rxe0 did not come up: $(ibv_devinfo -d rxe0 2>&1)"

export HOME=/root LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export KOLO_RDMA_DEV=rxe0 KOLO_RDMA_GID=$gid KOLO_RDMA_NETDEV=$nic KOLO_RDMA_IP=10.0.2.15
# Raw: no \n -> \r\n translation on the way to the host's stdout.
stty -F /dev/ttyS1 raw -echo
cut -d' ' -f1 /proc/uptime >"$CTL/ready"
cd "$REPO" || fail "cd $REPO"
bash "$CTL/cmd" </dev/null >/dev/ttyS1 2>&1
rc=$?
# Let the UART drain before the reboot cuts it off.
python3 -c 'import termios; termios.tcdrain(1)' >/dev/ttyS1
echo "$rc" >"$CTL/status"
reboot_now
