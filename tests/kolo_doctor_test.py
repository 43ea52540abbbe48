"""tools/kolo-doctor on hand-written flight records: the verdicts whose
inputs depend on timing in a real job (tests/flight_recorder_test.py), fixed
here so each one is checked every run. A stopped rank's neighbours time out
at their deadlines, and a survivor that closes after its own timeout can
reach a third rank first: that third rank's error then names the survivor's
closed connection, and the rank missing is still the one that hung."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.environ["TEST_SRCDIR"], os.environ["TEST_WORKSPACE"])
DOCTOR = os.path.join(ROOT, "tools", "kolo-doctor")
N = 4
S = 1_000_000_000


def entry(seq, state="completed", error="", start=None, end=None):
    start = seq * S if start is None else start
    return {"seq": seq, "what": "broadcast", "dtype": "float32", "op": "", "count": 1000, "root": seq % N,
            "state": state, "start_ns": start, "end_ns": start + S // 10 if end is None else end, "error": error}


def record(rank, entries):
    return {"format": "kolo-flight-record", "job": "job-1", "communicator": "world", "size": N, "rank": rank,
            "dumped_ns": 100 * S, "entries": entries}


def diagnose(errors, missing):
    """Records of N ranks that all completed calls 0-4 and failed call #5
    with errors[rank] (rank: (error, seconds waited)); missing ranks left none."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as d:
        for r in range(N):
            if r in missing:
                continue
            err, waited = errors[r]
            entries = [entry(s) for s in range(5)]
            entries.append(entry(5, "failed", err, start=5 * S, end=5 * S + int(waited * S)))
            with open(os.path.join(d, "kolo-flight.job-1.world.%d.json" % r), "w") as f:
                json.dump(record(r, entries), f)
        out = subprocess.run([sys.executable, DOCTOR, d], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             timeout=60)
        return out.stdout.decode()


def expect(name, text, first, words):
    line = text.splitlines()[0] if text else ""
    ok = line == first and all(w in text for w in words)
    print("%s: %s" % ("ok" if ok else "FAILED", name))
    if not ok:
        print("  wanted %r with %r; the doctor said:\n%s" % (first, words, text))
    return ok


def main():
    timeout = "TIMED_OUT: no progress before the deadline while receiving message 36 from rank %d (0 of 0 bytes)"
    closed = "PEER_LOST: rank %d (shared memory) closed the connection: its communicator closed or failed"
    died = "PEER_LOST: rank %d (shared memory) closed the connection: its process ended"
    ok = True
    # Rank 2 stopped: rank 3 times out on it first, then closes; rank 0
    # sees rank 3's close before its own deadline (the CI run's case).
    text = diagnose({0: (closed % 3, 2.01), 1: (timeout % 0, 2.02), 3: (timeout % 2, 2.0)}, {2})
    ok &= expect("stopped rank, a survivor's close seen first", text, "culprit: rank 2: hung (world)",
                 ["hung or was stopped", "no progress before the deadline while receiving message 36 from rank 2"])
    text = diagnose({0: (timeout % 3, 2.0), 1: (timeout % 2, 2.0), 3: (timeout % 2, 2.0)}, {2})
    ok &= expect("stopped rank, timeouts only", text, "culprit: rank 2: hung (world)", ["hung or was stopped"])
    # Rank 2 killed: its neighbours see its connections close at once.
    text = diagnose({0: (closed % 3, 0.3), 1: (died % 2, 0.1), 3: (died % 2, 0.1)}, {2})
    ok &= expect("killed rank", text, "culprit: rank 2: died (world)", ["died (the others lost its connections)"])
    ended = "PEER_LOST: rank %d (shared memory): its process has ended"
    text = diagnose({0: (ended % 2, 0.1), 1: (ended % 2, 0.1), 3: (ended % 2, 0.1)}, {2})
    ok &= expect("killed rank, seen by its process's end", text, "culprit: rank 2: died (world)", ["died"])
    text = diagnose({0: ("PEER_LOST: rank 2's process has ended", 0.1), 1: (timeout % 0, 2.0),
                     3: ("PEER_LOST: connection to rank 2 (10.0.0.3:4000) failed while this rank was sending: "
                         "Connection reset by peer", 0.2)}, {2})
    ok &= expect("killed rank, over TCP", text, "culprit: rank 2: died (world)", ["died"])
    text = diagnose({0: ("PEER_LOST: rank 0 lost a peer", 0.1), 1: (timeout % 0, 2.0), 3: (timeout % 0, 2.0)}, {2})
    ok &= expect("killed rank, no peer named", text, "culprit: rank 2: died (world)", ["died"])
    print("kolo_doctor_test: %s" % ("all cases passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
