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


def record(rank, entries, host="", report=None):
    return {"format": "kolo-flight-record", "job": "job-1", "communicator": "world", "size": N, "rank": rank,
            "host": host or "host-%d" % rank, "dumped_ns": 100 * S, "failure_report": report, "entries": entries}


def diagnose(errors, missing, hosts=None, store=None, late=None):
    """Records of N ranks that all completed calls 0-4 and failed call #5
    with errors[rank] (rank: (error, seconds waited)); missing ranks left none.
    A rank in errors with None stopped before call #5 (its record ends at
    #4). late[rank]: how many seconds after the others it started #5.
    hosts[rank]: its host (default one each); store[rank]: how its failure
    report to the job's store went ("reached", "unreachable" or "pending",
    started when its call failed)."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as d:
        for r in range(N):
            if r in missing:
                continue
            entries = [entry(s) for s in range(5)]
            if errors[r] is None:
                with open(os.path.join(d, "kolo-flight.job-1.world.%d.json" % r), "w") as f:
                    json.dump(record(r, entries, (hosts or {}).get(r)), f)
                continue
            err, waited = errors[r]
            start = 5 * S + int((late or {}).get(r, 0) * S)
            end = start + int(waited * S)
            entries.append(entry(5, "failed", err, start=start, end=end))
            report = None
            if store:
                # "unreachable": waited out its 2 s; "refused": at once
                # (rank 0's process had ended); "pending": still waiting.
                state = "unreachable" if store[r] == "refused" else store[r]
                took = {"reached": S // 100, "unreachable": 2 * S, "refused": S // 1000, "pending": 0}[store[r]]
                report = {"store": state, "started_ns": end, "finished_ns": end + took,
                          "first_failure_rank": 0 if store[r] == "reached" else -1}
            with open(os.path.join(d, "kolo-flight.job-1.world.%d.json" % r), "w") as f:
                json.dump(record(r, entries, (hosts or {}).get(r), report), f)
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
    timeout = "TIMEOUT: no progress before the deadline while receiving message 36 from rank %d (0 of 0 bytes)"
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
    # The same in the shared-memory arena (a broadcast): ranks 0 and 1 passed
    # the opening check and waited at the barrier, where rank 3's failure
    # reached them as its end of the arena closing.
    arena_closed = "PEER_LOST: rank %d (shared memory) closed its end: its communicator closed or failed"
    text = diagnose({0: (arena_closed % 3, 2.01), 1: (arena_closed % 3, 2.01), 3: (timeout % 2, 2.0)}, {2})
    ok &= expect("stopped rank, the arena's barrier", text, "culprit: rank 2: hung (world)", ["hung or was stopped"])
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
    # Rank 2 killed while rank 3 (sharing its core) was still on its way to
    # call #5: the others failed at once, so rank 3 had no time to arrive and
    # is not to blame (a CI run's case).
    text = diagnose({0: (closed % 1, 0.1), 1: (ended % 2, 0.1), 3: (ended % 2, 0.001)}, {2}, late={3: 0.101})
    ok &= expect("killed rank, a neighbour arriving after the others failed", text, "culprit: rank 2: died (world)",
                 ["rank 2 left no flight record: it died"])
    text = diagnose({0: (closed % 1, 0.1), 1: (ended % 2, 0.1), 3: None}, {2})
    ok &= expect("killed rank, a neighbour not yet at the call", text, "culprit: rank 2: died (world)", ["died"])
    # Where the others waited out their deadline, a rank that came after
    # they gave up, or never came, is the one missing.
    text = diagnose({0: (timeout % 3, 2.0), 1: (timeout % 0, 2.0), 2: (timeout % 1, 2.0), 3: (closed % 2, 0.001)}, set(),
                    late={3: 2.5})
    ok &= expect("a rank arriving after the others timed out", text, "culprit: rank 3: never-arrived (world)",
                 ["rank 3 never arrived at call #5", "in time: it came 0.50 s after the others had given up"])
    text = diagnose({0: (timeout % 3, 2.0), 1: (timeout % 0, 2.0), 2: (timeout % 1, 2.0), 3: None}, set())
    ok &= expect("a rank that never came", text, "culprit: rank 3: never-arrived (world)",
                 ["rank 3 never arrived at call #5", "its record ends at call #4"])
    # A partition: rank 2's host's link went down. Every rank waited for its
    # ring neighbour (rank 2's wait crosses the cut, and so do the others'
    # in a ring), all left records, and only rank 2's failure never reached
    # the store on rank 0 (dumped while still waiting for it, or given up).
    ring = {r: (timeout % ((r - 1) % N), 2.0) for r in range(N)}
    for late_report in ("pending", "unreachable"):
        text = diagnose(ring, set(), store={0: "reached", 1: "reached", 2: late_report, 3: "reached"})
        ok &= expect("partition, rank 2's host cut off (its report %s)" % late_report, text,
                     "culprit: rank 2: partition (world)", ["cut off from the others by the network",
                                                            "ranks 0, 1, 3 reached the job's store"])
    # Rank 0's host cut off: the others cannot reach its store.
    text = diagnose(ring, set(), store={0: "reached", 1: "unreachable", 2: "pending", 3: "unreachable"})
    ok &= expect("partition, the store's host cut off", text, "culprit: rank 0: partition (world)",
                 ["cut off from the others by the network"])
    # Rank 0 ended at once after its own failure, taking the store: ranks 1
    # and 2 were refused in no time, which says nothing of the network;
    # rank 3 waited in vain.
    text = diagnose(ring, set(), store={0: "reached", 1: "refused", 2: "refused", 3: "unreachable"})
    ok &= expect("partition, the store gone with rank 0 for the others", text, "culprit: rank 3: partition (world)",
                 ["cut off from the others by the network"])
    # Two hosts of two ranks apart: the side without the store is named.
    text = diagnose(ring, set(), hosts={0: "a", 1: "a", 2: "b", 3: "b"},
                    store={0: "reached", 1: "reached", 2: "unreachable", 3: "unreachable"})
    ok &= expect("partition, 2 x 2 hosts", text, "culprit: ranks 2, 3: partition (world)", ["on host b were cut off"])
    # Rank 0, whose process serves the store, stopped: the others time out
    # on it, and their failure reports never reach its store either.
    text = diagnose({1: (timeout % 0, 2.0), 2: (closed % 1, 2.01), 3: (closed % 2, 2.01)}, {0},
                    store={1: "unreachable", 2: "unreachable", 3: "pending"})
    ok &= expect("rank 0 stuck with the store", text, "culprit: rank 0: hung (world)",
                 ["rank 0 left no flight record", "the store's host is lost with it"])
    # Every report answered: timeouts with no one cut off are not a partition.
    text = diagnose(ring, set(), store={r: "reached" for r in range(N)})
    ok &= expect("timeouts, every report through", text,
                 "culprit: unknown: calls failed, but no rank stands out (each rank's first error is below)",
                 ["rank 2 failed call #5 (broadcast float32 count 1000 root 1)"])
    print("kolo_doctor_test: %s" % ("all cases passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
