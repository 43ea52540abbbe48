#!/usr/bin/env bash
# The flight recorder's fault matrix: see tests/flight_recorder_test.py.
exec python3 "$TEST_SRCDIR/$TEST_WORKSPACE/tests/flight_recorder_test.py"
