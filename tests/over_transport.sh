#!/usr/bin/env bash
# Runs another test with every communicator on one transport:
#   over_transport.sh TRANSPORT TEST [ARG...]
# (KOLO_TRANSPORT=TRANSPORT; the ranks kolorun starts inherit it), so one
# suite covers several transports without being built twice.
set -euo pipefail
export KOLO_TRANSPORT=$1
shift
exec "$@"
