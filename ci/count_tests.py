#!/usr/bin/env python3
"""Prints "PASSED FAILED SKIPPED" for a test report: ctest's JUnit file (--output-junit) or
GoogleTest's XML (--gtest_output=xml). ci/test.sh puts the counts in its summary.

A test is skipped when its report says so (a <skipped> element, or status/result "notrun",
"disabled", "skipped"), failed when it has a <failure> or <error> element or status "fail",
and passed otherwise. A missing or unreadable report prints "? ? ?" and exits 1, so that a
stage which never wrote its report cannot look clean.
"""
import sys
import xml.etree.ElementTree as ET

SKIPPED_WORDS = {"notrun", "disabled", "skipped"}


def classify(case):
    if case.find("failure") is not None or case.find("error") is not None or case.get("status") == "fail":
        return "failed"
    if (case.find("skipped") is not None or case.get("status") in SKIPPED_WORDS
            or case.get("result") in SKIPPED_WORDS):
        return "skipped"
    return "passed"


def main(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as error:
        print("? ? ?")
        print(f"count_tests: {path}: {error}", file=sys.stderr)
        return 1
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for case in root.iter("testcase"):
        counts[classify(case)] += 1
    print(counts["passed"], counts["failed"], counts["skipped"])
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: count_tests.py REPORT.xml")
    sys.exit(main(sys.argv[1]))
