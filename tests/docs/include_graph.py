#!/usr/bin/env python3
"""The tree holds its own plan: every #include and every link between kiln's CMake targets must
run down the floors below, or stay in its folder. Fails, naming each edge, on an include or a
link that runs up a floor or across to a folder the plan does not allow, on a folder-less
("bare") include of another folder's header, and on an include of a file that does not exist.

    include_graph.py SOURCE_DIR            check the tree
    include_graph.py --self-test           show that the check catches each kind of bad edge

The plan (README.md, "What is here", states it too). Each folder may use itself and the folders
listed for it; the public headers (include/kiln/) are everyone's. The kiln command (packager/)
reaches libkiln's runtime through those headers alone: it links the C API's target but includes
none of runtime/api, engine or the vendors.
"""
import os
import re
import sys

# folder -> the folders below it that it may include and link. Acyclic by construction (checked).
PLAN = {
    "runtime/core": [],
    "runtime/store": ["runtime/core"],
    "runtime/backend": ["runtime/core"],
    "runtime/cuda": ["runtime/backend", "runtime/core"],
    "runtime/hip": ["runtime/backend", "runtime/core"],
    "runtime/engine": ["runtime/cuda", "runtime/hip", "runtime/backend", "runtime/store", "runtime/core"],
    "runtime/api": ["runtime/engine", "runtime/backend", "runtime/core"],
    "packager/registry": ["runtime/store", "runtime/core"],
    "packager": ["packager/registry", "runtime/store", "runtime/core"],
}
# folder -> folders it may link without including their headers: the kiln command links libkiln's
# C API (kiln_c_api) and calls it through include/kiln/.
LINK_ONLY = {"packager": ["runtime/api"]}
# CMake target -> its folder.
TARGETS = {
    "kiln_core": "runtime/core", "kiln_store": "runtime/store", "kiln_backend": "runtime/backend",
    "kiln_cuda": "runtime/cuda", "kiln_hip": "runtime/hip", "kiln_engine": "runtime/engine",
    "kiln_c_api": "runtime/api", "libkiln": "runtime/api",
    "kiln_packager": "packager", "kiln": "packager", "kiln_registry": "packager/registry",
}

RUNTIME_FOLDERS = {f.split("/", 1)[1] for f in PLAN if f.startswith("runtime/")}
SOURCE_SUFFIXES = (".cpp", ".hpp", ".h", ".c")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
LINK = re.compile(r"target_link_libraries\(\s*(\S+)\s+(.*?)\)", re.S)


def folder_of(path):
    """The plan's folder a source path lies in, or None (tests, examples, Python)."""
    parts = path.split("/")
    if parts[0] == "runtime" and len(parts) >= 3:
        return "runtime/" + parts[1]
    if parts[0] == "packager" and len(parts) >= 2:
        if parts[1] == "python":
            return None
        return "packager/registry" if parts[1] == "registry" and len(parts) >= 3 else "packager"
    return None


def resolve_include(path, name, exists):
    """(folder, problem): the folder an include of `name` from `path` reaches, or a problem."""
    if name.startswith("kiln/"):
        return "include", None if exists("include/" + name) else f'"{name}" is not in include/'
    first = name.split("/", 1)[0]
    if "/" in name and first in RUNTIME_FOLDERS:
        target = "runtime/" + name
        return "runtime/" + first, None if exists(target) else f'"{name}" does not exist ({target})'
    if folder_of(path) in ("packager", "packager/registry"):
        # The kiln command's own headers are named from packager/: "cli_common.hpp", "registry/http.hpp".
        target = "packager/" + name
        if exists(target):
            return folder_of(target), None
    return None, f'"{name}" names no folder: include it as "core/{name}", "engine/{name}", ... from runtime/'


def check(files, cmake_files):
    """Violations (strings) in `files` {path: text} and `cmake_files` {path: text}."""
    problems = []
    exists = lambda p: p in files or p in cmake_files or p.startswith("include/kiln/") and p in EXTRA_FILES
    for path, text in sorted(files.items()):
        here = folder_of(path)
        if here is None or not path.endswith(SOURCE_SUFFIXES):
            continue
        allowed = set(PLAN[here]) | {here, "include"}
        for m in INCLUDE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            there, problem = resolve_include(path, m.group(1), exists)
            if problem:
                problems.append(f"{path}:{line}: {problem}")
            elif there not in allowed:
                way = "runs up from" if there in PLAN and here in below(there) else "crosses from"
                problems.append(f'{path}:{line}: #include "{m.group(1)}" {way} {here} to {there}, '
                                f"which the plan does not allow ({here} may use: {', '.join(PLAN[here]) or 'nothing'})")
    for path, text in sorted(cmake_files.items()):
        for m in LINK.finditer(text):
            target = m.group(1)
            if target not in TARGETS:
                continue
            here = TARGETS[target]
            allowed = set(PLAN[here]) | {here} | set(LINK_ONLY.get(here, []))
            for dep in m.group(2).split():
                if dep in TARGETS and TARGETS[dep] not in allowed:
                    problems.append(f"{path}: {target} links {dep}: {here} may not use {TARGETS[dep]}")
    return problems


def below(folder):
    """Every folder reachable down the plan from `folder`."""
    seen, todo = set(), list(PLAN[folder])
    while todo:
        f = todo.pop()
        if f not in seen:
            seen.add(f)
            todo.extend(PLAN[f])
    return seen


def plan_problems():
    return [f"the plan has a cycle through {f}" for f in PLAN if f in below(f)]


EXTRA_FILES = set()


def load(root):
    files, cmake_files = {}, {}
    for top in ("runtime", "packager", "include"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if d not in ("python", "__pycache__")]
            for name in filenames:
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root)
                if name == "CMakeLists.txt":
                    cmake_files[rel] = open(full, encoding="utf-8").read()
                elif name.endswith(SOURCE_SUFFIXES):
                    if top == "include":
                        EXTRA_FILES.add(rel)
                    else:
                        files[rel] = open(full, encoding="utf-8").read()
    return files, cmake_files


def self_test():
    EXTRA_FILES.add("include/kiln/kiln.h")
    base = {
        "runtime/core/format.hpp": "", "runtime/core/error.hpp": "", "runtime/engine/runtime.hpp": "",
        "runtime/api/api_support.hpp": "",
        "runtime/hip/hip_backend.hpp": "", "runtime/cuda/cuda_backend.hpp": '#include "backend/backend.hpp"\n',
        "runtime/backend/backend.hpp": '#include "core/format.hpp"\n#include "kiln/kiln.h"\n',
        "packager/cli_common.hpp": "", "packager/cmd_pack.cpp": '#include "cli_common.hpp"\n#include "core/format.hpp"\n',
    }
    cases = [
        ("an include up a floor", {"runtime/core/x.cpp": '#include "engine/runtime.hpp"\n'}, {}, "runs up from runtime/core"),
        ("an include across vendors", {"runtime/cuda/y.cpp": '#include "hip/hip_backend.hpp"\n'}, {}, "crosses from runtime/cuda"),
        ("a bare include", {"runtime/engine/z.cpp": '#include "format.hpp"\n'}, {}, "names no folder"),
        ("a missing header", {"runtime/engine/w.cpp": '#include "core/nothing.hpp"\n'}, {}, "does not exist"),
        ("a CLI file using the engine", {"packager/cmd_new.cpp": '#include "engine/runtime.hpp"\n'}, {}, "crosses from packager"),
        ("a CLI file including the C API's internals", {"packager/cmd_new.cpp": '#include "api/api_support.hpp"\n'}, {},
         "crosses from packager"),
        ("the kiln command linking the engine", {}, {"packager/CMakeLists.txt": "target_link_libraries(kiln_packager PUBLIC kiln_engine)"},
         "kiln_packager links kiln_engine"),
        ("a link up a floor", {}, {"runtime/core/CMakeLists.txt": "target_link_libraries(kiln_core PUBLIC kiln_engine)"},
         "kiln_core links kiln_engine"),
    ]
    if check(base, {}):
        print("self-test: the clean tree was refused:", check(base, {}))
        return 1
    failed = 0
    for what, extra, cmake, expected in cases:
        problems = check({**base, **extra}, cmake)
        if not any(expected in p for p in problems):
            print(f"self-test: {what} was not caught (expected '{expected}'; got {problems})")
            failed = 1
        else:
            print(f"self-test: {what} caught")
    return failed


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    problems = plan_problems()
    files, cmake_files = load(argv[1])
    problems += check(files, cmake_files)
    for p in problems:
        print(p)
    edges = sum(len(INCLUDE.findall(t)) for p, t in files.items() if folder_of(p))
    print(f"include graph: {len(files)} files, {edges} includes checked against the plan: "
          + (f"{len(problems)} problem(s)" if problems else "every edge runs down or stays in its folder"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
