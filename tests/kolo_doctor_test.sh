#!/usr/bin/env bash
# tools/kolo-doctor's verdicts on hand-written records: see tests/kolo_doctor_test.py.
exec python3 "$TEST_SRCDIR/$TEST_WORKSPACE/tests/kolo_doctor_test.py"
