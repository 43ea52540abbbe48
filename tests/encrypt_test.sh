#!/usr/bin/env bash
# What an encrypted job puts on the wire, as tcpdump sees it on the
# loopback: 2 ranks over TCP, rank 0 broadcasting a known text, every rank
# named by a known host name (which travels in the rendezvous store's
# records). With KOLO_ENCRYPT=0 both show in the capture; with
# KOLO_ENCRYPT=1 neither does, and the job still gets the text right.
# Tampering with the bytes is refused (transport/tcp/encrypted_transport_test,
# runtime/store_test); this checks the whole job, store included.
set -uo pipefail
# shellcheck source=tests/lib/common.sh
. "$TEST_SRCDIR/$TEST_WORKSPACE/tests/lib/common.sh"
WORKER="$TEST_SRCDIR/$TEST_WORKSPACE/tests/mp_worker"
WORK="${TEST_TMPDIR:-/tmp}/encrypt_test"
mkdir -p "$WORK"
if ! command -v tcpdump >/dev/null || [ "$(id -u)" -ne 0 ]; then
  fail "tcpdump as root is needed (tools/setup.sh installs it; CI runs as root)"
  finish encrypt_test
fi
TEXT="kolo-plaintext-probe-gradient-4711 "
HOST="visible-host-name-0xc0ffee"

for encrypt in 0 1; do
  capture="$WORK/capture.$encrypt"
  port=$(free_port)
  tcpdump -i lo -U -w "$capture" "tcp" 2>"$WORK/tcpdump.$encrypt" &
  dump=$!
  # tcpdump says so once it listens.
  for _ in $(seq 100); do grep -q "listening on" "$WORK/tcpdump.$encrypt" && break; sleep 0.05; done
  pids=()
  for r in 0 1; do
    env KOLO_RANK=$r KOLO_WORLD_SIZE=2 KOLO_MASTER_ADDR=127.0.0.1 KOLO_MASTER_PORT="$port" KOLO_TRANSPORT=tcp \
      KOLO_SECRET=encrypt-test KOLO_ENCRYPT=$encrypt KOLO_HOSTNAME="$HOST" KOLO_TIMEOUT_S=30 TEXT_TO_SEND="$TEXT" \
      "$WORKER" text >"$WORK/rank$r.$encrypt" 2>&1 &
    pids+=($!)
  done
  for r in 0 1; do
    wait "${pids[$r]}" || { fail "KOLO_ENCRYPT=$encrypt: rank $r failed"; cat "$WORK/rank$r.$encrypt"; }
    grep -q "the text arrived" "$WORK/rank$r.$encrypt" || fail "KOLO_ENCRYPT=$encrypt: rank $r did not get the text"
  done
  sleep 0.2
  kill -INT "$dump"
  wait "$dump"
  texts=$(tcpdump -r "$capture" -A 2>/dev/null | grep -c "plaintext-probe-gradient")
  hosts=$(tcpdump -r "$capture" -A 2>/dev/null | grep -c "$HOST")
  packets=$(tcpdump -r "$capture" 2>/dev/null | wc -l)
  echo "KOLO_ENCRYPT=$encrypt: $packets packets captured; the text in $texts, the host name in $hosts"
  if [ "$encrypt" = 0 ]; then
    [ "$texts" -gt 0 ] && [ "$hosts" -gt 0 ] || fail "unencrypted, the capture should show the text and the host name"
  else
    [ "$packets" -gt 20 ] || fail "encrypted: too few packets captured ($packets) to tell anything"
    [ "$texts" -eq 0 ] || fail "encrypted, the text showed on the wire"
    [ "$hosts" -eq 0 ] || fail "encrypted, the host name showed on the wire (the store's records)"
  fi
done
finish encrypt_test
