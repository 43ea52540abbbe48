#!/usr/bin/env bash
# Runs a ThreadWorld test with its ranks on K emulated hosts:
#   over_hosts.sh K TEST [ARG...]
# (KOLO_TEST_HOSTS=K, tests/thread_world.h): ranks of one host share
# memory, and reach the other hosts over TCP.
set -euo pipefail
export KOLO_TEST_HOSTS=$1
shift
exec "$@"
