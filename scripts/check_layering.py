#!/usr/bin/env python3
"""Checks that data flows one way through the modules (docs/architecture.md).

The top-level CMakeLists.txt lists the modules in data-flow order (KAREUS_MODULES); `cli` comes
after all of them. A module may name only itself and modules before it, both in the CMake files of
src/kareus/<module>/ (a kareus_module's DEPS, a target_link_libraries) and in the #include
"kareus/<module>/..." lines of its sources. Anything else is listed with its file and line, and the
check fails. A known violation recorded in KNOWN below is listed but does not fail the check until
it is gone; then the check fails until the record is removed too, so the list only shrinks.

Run in the repository root: python3 scripts/check_layering.py [ROOT] [--strict]
(--strict: every violation fails, known or not). ctest runs it as layering_check.
"""
import re
import sys
from pathlib import Path

# (module, the later module it names): why it is not fixed yet.
KNOWN: dict = {}

# What a training job links: the runtime reaches (through every CMake link and include, directly or
# not) only these modules, so its C library and Python module carry no solver, search or compose.
RUNTIME_REACHES = {"core", "schedule", "interop", "hardware", "plan", "runtime"}

SOURCE_SUFFIXES = {".hpp", ".cpp", ".h", ".c", ".cu", ".cuh", ".inc"}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]kareus/([A-Za-z0-9_]+)/')
TARGET = re.compile(r"\bkareus_([a-z0-9_]+)")
CALL = re.compile(r"\b(kareus_module|target_link_libraries)\s*\(([^)]*)\)", re.S)


def read_modules(root):
    text = strip_cmake_comments((root / "CMakeLists.txt").read_text())
    found = re.search(r"set\s*\(\s*KAREUS_MODULES\s+([^)]*)\)", text)
    if not found:
        sys.exit("check_layering: no set(KAREUS_MODULES ...) in CMakeLists.txt")
    return found.group(1).split() + ["cli"]


def strip_cmake_comments(text):
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def module_of_target(name, modules):
    """The module a target kareus_<name> belongs to (kareus_executor_cuda: evaluate), or None."""
    best = None
    for module in modules:
        if name == module or name.startswith(module + "_"):
            if best is None or len(module) > len(best):
                best = module
    return best


def cmake_names(path, modules):
    """(line, module named) for every module target a kareus_module or target_link_libraries names
    after its first argument (the target itself)."""
    text = strip_cmake_comments(path.read_text())
    for call in CALL.finditer(text):
        args = call.group(2)
        first = re.match(r"\s*\S+", args)
        rest_start = call.start(2) + (first.end() if first else 0)
        for target in TARGET.finditer(text, rest_start, call.end(2)):
            module = module_of_target(target.group(1), modules)
            if module:
                yield text.count("\n", 0, target.start()) + 1, module


def include_names(path):
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        found = INCLUDE.match(line)
        if found:
            yield number, found.group(1)


def main(argv):
    strict = "--strict" in argv
    args = [a for a in argv if a != "--strict"]
    root = Path(args[0] if args else ".").resolve()
    modules = read_modules(root)
    rank = {module: i for i, module in enumerate(modules)}
    src = root / "src" / "kareus"

    problems, known_seen = [], {}
    names = {module: set() for module in modules}  # the modules each one names
    for directory in sorted(p for p in src.iterdir() if p.is_dir()):
        if directory.name not in rank:
            problems.append(f"src/kareus/{directory.name}/: not a module of KAREUS_MODULES")
    for module in modules:
        directory = src / module
        if not directory.is_dir():
            problems.append(f"src/kareus/{module}/: in KAREUS_MODULES but missing")
            continue
        for path in sorted(directory.rglob("*")):
            if path.name == "CMakeLists.txt":
                kind, found = "links", cmake_names(path, modules)
            elif path.suffix in SOURCE_SUFFIXES:
                kind, found = "includes", include_names(path)
            else:
                continue
            for line, named in found:
                names.setdefault(module, set()).add(named)
                place = f"{path.relative_to(root)}:{line}"
                if named not in rank:
                    problems.append(f"{place}: {module} includes kareus/{named}/, not a module")
                elif rank[named] > rank[module]:
                    message = f"{place}: {module} {kind} {named}, which comes after it"
                    if not strict and (module, named) in KNOWN:
                        known_seen.setdefault((module, named), []).append(message)
                    else:
                        problems.append(message)

    reached, todo = set(), ["runtime"]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(names.get(module, ()))
    for module in sorted(reached - RUNTIME_REACHES):
        problems.append(f"the runtime reaches {module} (what a training job links: "
                        f"{', '.join(sorted(RUNTIME_REACHES))})")

    print("module order: " + " ".join(modules))
    for pair, messages in sorted(known_seen.items()):
        print(f"known, not yet fixed: {pair[0]} -> {pair[1]} ({KNOWN[pair]}):")
        for message in messages:
            print("  " + message)
    if not strict:
        for pair in sorted(set(KNOWN) - set(known_seen)):
            problems.append(f"KNOWN lists {pair[0]} -> {pair[1]}, which no longer occurs: remove it "
                            "from scripts/check_layering.py")
    for problem in problems:
        print("violation: " + problem)
    if problems:
        print(f"{len(problems)} violation(s) of the module order (docs/architecture.md)")
        return 1
    print("no violation beyond the known ones" if known_seen
          else "every module names only itself and modules before it")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
