#!/usr/bin/env bash
# Runs another test with every communicator on one transport:
#   over_transport.sh TRANSPORT TEST [ARG...]
# (KOLO_TRANSPORT=TRANSPORT; the ranks kolorun starts inherit it), so one
# suite covers several transports without being built twice. TRANSPORT
# tcp+encrypt is TCP with every connection sealed (KOLO_ENCRYPT=1).
set -euo pipefail
export KOLO_TRANSPORT=${1%+encrypt}
if [ "$1" != "$KOLO_TRANSPORT" ]; then
  export KOLO_ENCRYPT=1 KOLO_SECRET=${KOLO_SECRET:-over-transport-secret-of-32-characters-or-more}
fi
shift
exec "$@"
