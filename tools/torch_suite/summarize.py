"""Reads the JUnit report of one suite run (run.sh) and prints the failed
tests with the exception each rank raised, then the counts line:

    summarize.py BACKEND RANKS REPORT.xml
    summarize.py --compare A.xml B.xml   # tests that pass in A but fail in B

A failed test's pytest text is the suite's "Process i exited with error
code 10 and exception: <traceback>" per rank; its useful part is each
traceback's last line (the exception), which is what gets printed, so that
failures of one cause read alike. A test whose ranks hung is reported as
the suite says it: "... terminated or timed out after N seconds".
"""
import re
import sys
import xml.etree.ElementTree as ET

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
        for name in sorted(b):
            if b[name][0] == "failed" and a.get(name, ("",))[0] == "passed":
                print("%s: %s" % (name, b[name][1]))
        return
    backend, ranks, results = argv[0], int(argv[1]), outcomes(argv[2])
    for name in sorted(results):
        if results[name][0] == "failed":
            print("FAILED %s (%.0f s): %s" % (name, results[name][2], results[name][1]))
    counts = {k: sum(1 for v in results.values() if v[0] == k) for k in ("passed", "failed", "skipped")}
    print("%s %d ranks: %d passed, %d failed, %d skipped" % (
        backend, ranks, counts["passed"], counts["failed"], counts["skipped"]))


if __name__ == "__main__":
    main(sys.argv[1:])
