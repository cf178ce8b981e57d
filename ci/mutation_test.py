#!/usr/bin/env python3
"""Mutation testing for kiln's security checks: breaks each check in turn, rebuilds, and shows
that a test fails. A mutation that no test catches is a check the suite would not notice losing.

Usage: ci/mutation_test.py [--build DIR] [--only NAME]
Works in a git worktree of HEAD (so the checkout is never touched), with one build folder reused
across mutations (only the mutated file and what links it are rebuilt). Prints one table last;
exit 1 if any mutation survived or no longer applies (a check that moved: update the table here).
"""
import argparse, os, subprocess, sys, tempfile, time

# name, file, text to find (exactly once), its replacement, ctest regex of the tests that must
# fail, build targets holding them.
MUTATIONS = [
    ("content digest after decompression (read)", "runtime/core/archive_reader.cpp",
     "    if (content_hash != e.content_sha256) {", "    if (false && content_hash != e.content_sha256) {",
     "Semantic\\.", ["kiln_unit_tests"]),
    ("content digest after decompression (deep verify)", "runtime/core/archive_reader.cpp",
     "    if (content != e.content_sha256) {", "    if (false && content != e.content_sha256) {",
     "Semantic\\.", ["kiln_unit_tests"]),
    ("stored digest of a member read", "runtime/core/archive_reader.cpp",
     "  std::vector<std::uint8_t> stored = copy_out(e.offset, e.stored_size);\n  Sha256 got = sha256(stored.data(), stored.size());\n  if (got != e.stored_sha256) {",
     "  std::vector<std::uint8_t> stored = copy_out(e.offset, e.stored_size);\n  Sha256 got = sha256(stored.data(), stored.size());\n  if (false && got != e.stored_sha256) {",
     "Tamper\\.|Hostile\\.", ["kiln_unit_tests"]),
    ("signature threshold", "runtime/core/trust.cpp",
     "if (!refused && report.distinct_trusted_signers < policy.threshold) {",
     "if (!refused && report.distinct_trusted_signers + 1 < policy.threshold) {",
     "Signatures\\.|TrustSetLoading|Keys", ["kiln_unit_tests"]),
    ("PTX 'a' suffix: exact cc only", "runtime/cuda/cuda_target.cpp",
     "  bool arch_fits = t.suffix == 'a'   ? (d.cc_major == t.major && d.cc_minor == t.minor)",
     "  bool arch_fits = t.suffix == 'a'   ? (d.cc_major == t.major && d.cc_minor >= t.minor)",
     "Rules|Ranking", ["kiln_unit_tests"]),
    ("zstd window limit", "runtime/core/compress.cpp",
     "  if (header.windowSize > (1ull << kMaxWindowLog)) {", "  if (false && header.windowSize > (1ull << kMaxWindowLog)) {",
     "Semantic\\.", ["kiln_unit_tests"]),
    ("index arch tags against the code bytes", "runtime/core/archive_semantics.cpp",
     "  if (e.backend != info.backend || e.kind != info.kind || e.arch != join_targets(info.targets)) {",
     "  if (false) {", "Semantic\\.", ["kiln_unit_tests"]),
    ("kernel table derived from kiln.toml", "runtime/core/archive_reader.cpp",
     "      if (i < 0 || read_member(static_cast<std::size_t>(i)) != member.content) disagree(member.path);",
     "      if (i < 0) disagree(member.path);", "Hostile\\.", ["kiln_unit_tests"]),
    ("store anti-rollback in the writer (seq < highest)", "runtime/store/store.cpp",
     "  } else if (info.sequence < s.highest_sequence) {", "  } else if (info.sequence + 1 < s.highest_sequence) {",
     "Store", ["kiln_store_tests"]),
    ("store anti-rollback in the chain replay", "runtime/store/chain.cpp",
     "    if (!(h.sequence > s.highest_sequence || (first && h.sequence == 0))) {",
     "    if (!(h.sequence + 1 > s.highest_sequence || (first && h.sequence == 0))) {",
     "Store", ["kiln_store_tests"]),
    ("store: the highest never goes down (rollback lowers it)", "runtime/store/chain.cpp",
     "    *active = h.digest;  // the highest stays: it never goes down",
     "    *active = h.digest;  *highest = earlier->sequence;",
     "Store", ["kiln_store_tests"]),
    ("a variant's code is for the kernel's target (runtime, on the index)", "runtime/engine/resolve.cpp",
     "      if (p.empty()) p = kiln::variant_code_problem(k.spec_, v, c, reader_->entry(members[c]), e);\n      if (!p.empty())",
     "      if (p.empty()) p = kiln::variant_code_problem(k.spec_, v, c, reader_->entry(members[c]), e);\n      if (false)",
     "Semantic\\.AVariant", ["kiln_unit_tests"]),
    ("path component length", "runtime/core/format.cpp",
     "    if (part.size() > kMaxPathComponentLength) {", "    if (part.size() > 8 * kMaxPathComponentLength) {",
     "MemberPath|Hostile\\.", ["kiln_unit_tests"]),
]


def sh(cmd, cwd, log, check=True):
    with open(log, "a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        r = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {r.returncode}); see {log}")
    return r.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(tempfile.gettempdir(), "kiln-mutation-build"))
    ap.add_argument("--only")
    ap.add_argument("--jobs", default=str(os.cpu_count() or 2))
    args = ap.parse_args()
    repo = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True).stdout.strip()
    tree = os.path.join(tempfile.gettempdir(), "kiln-mutation-tree")
    log = os.path.join(tempfile.gettempdir(), "kiln-mutation.log")
    open(log, "w").close()
    subprocess.run(["git", "worktree", "remove", "--force", tree], cwd=repo, capture_output=True)
    sh(["git", "worktree", "add", "--detach", "--force", tree, "HEAD"], repo, log)
    rows = []
    try:
        sh(["cmake", "-S", tree, "-B", args.build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], tree, log)
        targets = sorted({t for m in MUTATIONS for t in m[5]})
        sh(["cmake", "--build", args.build, "-j", args.jobs, "--target", *targets], tree, log)
        for name, path, find, replace, tests, build_targets in MUTATIONS:
            if args.only and args.only not in name:
                continue
            full = os.path.join(tree, path)
            original = open(full).read()
            if original.count(find) != 1:
                rows.append((name, "NO LONGER APPLIES", f"{original.count(find)} matches in {path}", 0))
                continue
            start = time.time()
            try:
                open(full, "w").write(original.replace(find, replace))
                sh(["cmake", "--build", args.build, "-j", args.jobs, "--target", *build_targets], tree, log)
                rc = sh(["ctest", "--test-dir", args.build, "-R", tests, "-j", args.jobs, "--output-on-failure"], tree, log,
                        check=False)
                verdict = "caught" if rc != 0 else "SURVIVED"
                rows.append((name, verdict, f"{path}; tests /{tests}/", time.time() - start))
            finally:
                open(full, "w").write(original)
        # Back to the real code: the same tests pass, so each failure above was the mutation's.
        sh(["cmake", "--build", args.build, "-j", args.jobs, "--target", *targets], tree, log)
        clean = sh(["ctest", "--test-dir", args.build, "-R", "|".join(sorted({m[4] for m in MUTATIONS})), "-j", args.jobs],
                   tree, log, check=False)
        rows.append(("unmutated code, same tests", "pass" if clean == 0 else "FAIL", "control", 0))
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", tree], cwd=repo, capture_output=True)
    print(f"\nmutation testing of {subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=repo, capture_output=True, text=True).stdout.strip()} (log: {log})")
    print(f"{'mutation':52} {'result':18} {'seconds':>7}  where")
    for name, verdict, where, seconds in rows:
        print(f"{name:52} {verdict:18} {seconds:7.0f}  {where}")
    bad = [r for r in rows if r[1] not in ("caught", "pass")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
