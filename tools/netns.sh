#!/usr/bin/env bash
# An emulated cluster on one machine: K "hosts", each a network namespace
# with one interface (eth0, 10.77.0.<i+1>/24), joined by a bridge that lives
# in a namespace of its own, so the machine's own network is never touched.
# Links can be shaped (tc rate), made lossy (iptables random drop; this
# kernel has no netem), and taken down.
#
#   tools/netns.sh up K [RATE] [LOSS]   e.g.  up 4 1gbit 0.01
#   tools/netns.sh down                  remove every namespace of the prefix
#   tools/netns.sh link-down I | link-up I
#   tools/netns.sh addr I                the address of host I
#   tools/netns.sh exec I CMD...         run CMD on host I
#   tools/netns.sh sshd DIR [I...]       an sshd on each host (or those
#                                        given) on its addresses, port 22,
#                                        with a key pair made in DIR once;
#                                        `ssh -F DIR/ssh_config ADDR` (or
#                                        KOLO_SSH_OPTIONS="-F DIR/ssh_config"
#                                        for kolorun) logs in as this user
#   tools/netns.sh probe                 can it be done here? If not, prints
#                                        why (one line) and exits 1
# `down` ends every process left in the namespaces (an sshd, a rank)
# before removing them. KOLO_NETNS_PREFIX (default "kolo-") names the
# namespaces: <prefix>h<I> and <prefix>sw, so concurrent users can keep
# apart. Needs root, or what
# root has and a container or chroot may lack (CAP_NET_ADMIN, mounts):
# `probe` tries each piece.
set -euo pipefail
P="${KOLO_NETNS_PREFIX:-kolo-}"
SW="${P}sw"

addr() { echo "10.77.0.$(($1 + 1))"; }

down() {
  local ns pids
  for ns in $(ip netns list | awk '{print $1}' | grep "^${P}" || true); do
    # Removing a namespace ends none of its processes: they would live on
    # with no network.
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    # shellcheck disable=SC2086  # one word per pid
    [[ -n "$pids" ]] && kill -KILL $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null || true
  done
}

# sshd DIR [I...]: one sshd per host, its settings, keys and log in DIR.
sshd() {
  local dir=$1 i
  shift
  mkdir -p "$dir" /run/sshd  # /run/sshd: sshd's privilege separation directory
  [[ -f "$dir/id" ]] || ssh-keygen -q -t ed25519 -N "" -f "$dir/id"
  [[ -f "$dir/host_key" ]] || ssh-keygen -q -t ed25519 -N "" -f "$dir/host_key"
  cp "$dir/id.pub" "$dir/authorized_keys"
  printf 'Host *\n  IdentityFile %s\n  UserKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n  LogLevel ERROR\n' \
    "$dir/id" >"$dir/ssh_config"
  if (($# == 0)); then
    # shellcheck disable=SC2046  # one word per host index
    set -- $(ip netns list | awk '{print $1}' | sed -n "s/^${P}h\([0-9]*\)$/\1/p")
  fi
  for i in "$@"; do
    # Every address of the host (the namespace is its own): eth0's and any
    # a test adds.
    printf '%s\n' "ListenAddress 0.0.0.0" "HostKey $dir/host_key" "AuthorizedKeysFile $dir/authorized_keys" \
      "PidFile $dir/sshd_$i.pid" "StrictModes no" "UsePAM no" "PermitRootLogin prohibit-password" \
      "PasswordAuthentication no" "KbdInteractiveAuthentication no" >"$dir/sshd_$i.conf"
    ip netns exec "${P}h$i" /usr/sbin/sshd -f "$dir/sshd_$i.conf" -E "$dir/sshd_$i.log"
  done
}

up() {
  local k=$1 rate=${2:-} loss=${3:-}
  down
  ip netns add "$SW"
  ip -n "$SW" link add br0 type bridge
  ip -n "$SW" link set br0 up
  ip -n "$SW" link set lo up
  for ((i = 0; i < k; i++)); do
    local h="${P}h$i"
    ip netns add "$h"
    # The veth pair is born in the host namespace and one end moves to the switch.
    ip -n "$h" link add eth0 type veth peer name "sw$i"
    ip -n "$h" link set "sw$i" netns "$SW"
    ip -n "$SW" link set "sw$i" master br0
    ip -n "$SW" link set "sw$i" up
    ip -n "$h" addr add "$(addr "$i")/24" dev eth0
    ip -n "$h" link set eth0 up
    ip -n "$h" link set lo up
    if [[ -n "$rate" ]]; then
      # Shape both directions: the host's egress, and the switch port's
      # egress toward the host.
      ip netns exec "$h" tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 100ms
      ip netns exec "$SW" tc qdisc add dev "sw$i" root tbf rate "$rate" burst 256kb latency 100ms
    fi
    if [[ -n "$loss" && "$loss" != 0 ]]; then
      ip netns exec "$h" iptables -A INPUT -i eth0 -m statistic --mode random --probability "$loss" -j DROP
    fi
  done
}

# A throwaway host with one shaped, lossy link: what `up 1 RATE LOSS` does,
# piece by piece, so that the first piece that fails is named.
probe() {
  local ns="${P}probe$$" out
  command -v ip >/dev/null || { echo "no ip command (iproute2)"; return 1; }
  out=$(ip netns add "$ns" 2>&1) || { echo "cannot create a network namespace (ip netns add: ${out%%$'\n'*})"; return 1; }
  if ! out=$(ip -n "$ns" link add eth0 type veth peer name sw0 2>&1 && ip -n "$ns" link add br0 type bridge 2>&1); then
    out="cannot make veth pairs and bridges in a network namespace (ip link add: ${out%%$'\n'*})"
  elif ! out=$(ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate 1gbit burst 256kb latency 100ms 2>&1); then
    out="cannot shape a link with tc in a network namespace (tc qdisc add ... tbf: ${out%%$'\n'*})"
  elif ! out=$(ip netns exec "$ns" iptables -A INPUT -i eth0 -m statistic --mode random --probability 0.01 -j DROP 2>&1); then
    out="cannot drop packets with iptables in a network namespace (iptables -m statistic: ${out%%$'\n'*})"
  else
    out=""
  fi
  ip netns del "$ns" 2>/dev/null || true
  [[ -z "$out" ]] || { echo "$out"; return 1; }
}

case "${1:-}" in
  up) shift; up "$@" ;;
  down) down ;;
  link-down) ip -n "${P}h$2" link set eth0 down ;;
  link-up) ip -n "${P}h$2" link set eth0 up ;;
  addr) addr "$2" ;;
  exec) i=$2; shift 2; exec ip netns exec "${P}h$i" "$@" ;;
  sshd) shift; sshd "$@" ;;
  probe) probe ;;
  *) sed -n '2,26p' "$0"; exit 2 ;;
esac
