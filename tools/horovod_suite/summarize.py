"""Merges the ranks' JUnit reports of one Horovod suite run: a test passed
if it passed on every rank, failed if it failed or errored on any, else was
skipped. A failure that not_applicable.py explains (a Keras 2 API the test
uses, say) is counted as not applicable instead. Prints the failed, not
applicable and skipped tests with a line of why, then the counts and the
share of the tests that apply which passed.

    summarize.py RANKS REPORT.xml...
"""
import sys
import xml.etree.ElementTree as ET

import not_applicable


def outcomes(path):
    result = {}
    for case in ET.parse(path).iter("testcase"):
        name = case.get("name")
        kind, why = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                kind, why = "failed", (child.get("message") or "").strip()
            elif child.tag == "skipped" and kind == "passed":
                kind, why = "skipped", (child.get("message") or "").strip()
        result[name] = (kind, why.splitlines()[0][:160] if why else "")
    return result


def main(expected_ranks, paths):
    ranks = [outcomes(p) for p in paths]
    names = sorted(set().union(*ranks))
    merged = {}
    for name in names:
        seen = [r.get(name, ("failed", "did not run on every rank")) for r in ranks]
        failed = [s for s in seen if s[0] == "failed"]
        if failed and not_applicable.reason(name, failed[0][1], expected_ranks):
            merged[name] = ("n/a", not_applicable.reason(name, failed[0][1], expected_ranks))
        elif failed:
            merged[name] = failed[0]
        elif all(s[0] == "passed" for s in seen):
            merged[name] = ("passed", "")
        else:
            merged[name] = next(s for s in seen if s[0] == "skipped")
    for kind in ("failed", "n/a", "skipped"):
        for name in names:
            if merged[name][0] == kind:
                print("%-8s %s: %s" % (kind, name, merged[name][1]))
    counts = {k: sum(1 for v in merged.values() if v[0] == k) for k in ("passed", "failed", "n/a", "skipped")}
    missing = "" if len(paths) == expected_ranks else (
        "; only %d of %d ranks left a report, the others were ended when one failed" % (len(paths), expected_ranks))
    applying = counts["passed"] + counts["failed"]
    print("horovod suite: %d passed, %d failed, %d not applicable, %d skipped (%d ranks%s); %s of the tests that "
          "apply passed" % (counts["passed"], counts["failed"], counts["n/a"], counts["skipped"], expected_ranks,
                            missing, "%.1f%%" % (100.0 * counts["passed"] / applying) if applying else "none"))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2:])
