"""Reads the JUnit report of one suite run (run.sh) and prints the failed
tests with the exception each rank raised, then the counts line:

    summarize.py BACKEND RANKS REPORT.xml
    summarize.py --compare A.xml B.xml   # of the tests A passes, those B fails

Each failure is followed by its reason where known_failures.py names one
("UNEXPLAINED" where not); --compare ends with the share of A's passes that
B passes.

A failed test's pytest text is the suite's "Process i exited with error
code 10 and exception: <traceback>" per rank; its useful part is each
traceback's last line (the exception), which is what gets printed, so that
failures of one cause read alike. A test whose ranks hung is reported as
the suite says it: "... terminated or timed out after N seconds".
"""
import re
import sys
import xml.etree.ElementTree as ET

import known_failures

_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b")


def why(text):
    """The exception lines of a failure: each rank's exception, once."""
    # pytest prefixes the exception's text with "E   "; the ranks' tracebacks
    # sit inside it, each after "Process i exited with error code 10".
    lines = [re.sub(r"^E\s+", "", l).strip() for l in (text or "").splitlines()]
    blocks, current = [], None
    for line in lines:
        if re.match(r"Process \d+ exited with error code", line):
            current = []
            blocks.append(current)
        elif current is not None:
            current.append(line)
    if not blocks:  # no rank raised: the parent's own failure (a rank crashed, a timeout)
        blocks = [lines]
    for line in lines:  # a rank that crashed (a signal) or hung: the suite's words for it
        hit = re.search(r"Expect process \d+ exit code.*|Process \d+ terminated or timed out after.*", line)
        if hit:
            return hit.group(0)
    found = []
    for block in blocks:
        # The last "SomethingError: ..." line (a C++ exception's message is
        # followed by its stack frames; pytest's own lines come last).
        named = [l for l in block if _EXCEPTION.match(l)]
        rest = [l for l in block if l and not l.startswith(("frame #", "/"))]
        found.append(named[-1] if named else rest[-1] if rest else "")
    found = [f[:300] for f in found]
    return " | ".join(dict.fromkeys(found))  # each distinct line once


def outcomes(path):
    result = {}
    for case in ET.parse(path).iter("testcase"):
        kind, reason = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                kind, reason = "failed", why((child.text or "") + "\n" + (child.get("message") or ""))
            elif child.tag == "skipped":
                kind, reason = "skipped", (child.get("message") or "").strip().splitlines()[0][:200]
        result[case.get("name")] = (kind, reason, float(case.get("time") or 0))
    return result


def main(argv):
    if argv[0] == "--compare":
        a, b = outcomes(argv[1]), outcomes(argv[2])
        passed_a = [name for name in sorted(a) if a[name][0] == "passed"]
        lost = [name for name in passed_a if b.get(name, ("missing",))[0] != "passed"]
        for name in lost:
            kind, text = b.get(name, ("missing", "not run"))[:2]
            print("%s %s: %s\n    %s" % (kind, name, text, known_failures.reason(name) or "UNEXPLAINED"))
        kept = len(passed_a) - len(lost)
        print("%d of the %d tests %s passes pass in %s (%.1f%%); %d of the rest have a named reason" % (
            kept, len(passed_a), argv[1], argv[2], 100.0 * kept / max(1, len(passed_a)),
            sum(1 for name in lost if known_failures.reason(name))))
        return
    backend, ranks, results = argv[0], int(argv[1]), outcomes(argv[2])
    for name in sorted(results):
        if results[name][0] == "failed":
            print("FAILED %s (%.0f s): %s\n    %s" % (name, results[name][2], results[name][1],
                                                    known_failures.reason(name) or "UNEXPLAINED"))
    counts = {k: sum(1 for v in results.values() if v[0] == k) for k in ("passed", "failed", "skipped")}
    print("%s %d ranks: %d passed, %d failed, %d skipped" % (
        backend, ranks, counts["passed"], counts["failed"], counts["skipped"]))


if __name__ == "__main__":
    main(sys.argv[1:])
