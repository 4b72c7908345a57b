#!/usr/bin/env python3
"""Check nanoforge's include graph: dependencies point down only, and no two files include each other.

ALLOWED below is the one place the graph is written (README.md and docs/architecture.md link here): each part
(a top-level folder, or a room of data/) and the parts its quoted #includes may name; PRIVATE, the folders only
their part and the tests may include. Exits 1 naming each violation and each file-level include cycle.

    python3 tools/dev/check_includes.py [REPO_ROOT]
"""
import os
import re
import sys

# part -> the parts it may include (besides itself). A part is a top-level folder, or a room of data/.
ALLOWED = {
    "support": [],
    "h5": ["support"],
    "emulator": ["support"],
    "kernels": ["emulator", "support"],
    "model": ["kernels", "h5", "support"],
    "data/documents": ["support"],
    "data/tokenizer": ["data/documents", "support"],
    "data/shards": ["h5", "support"],
    "data/loader": ["data/shards", "support"],
    "data/prep": ["data/documents", "data/tokenizer", "data/shards", "support"],
    "dist": ["kernels", "support"],
    "launch": ["dist", "support"],
    "optim": ["model", "dist", "kernels", "support"],
    "doctor": ["dist", "kernels", "support"],
    "step": ["optim", "model", "dist", "kernels", "support"],
    "perf": ["step", "optim", "model", "dist", "kernels", "support"],
    "eval": ["model", "data/documents", "data/tokenizer", "data/shards", "data/loader", "dist", "kernels",
             "support"],
    "train": ["eval", "perf", "step", "model", "optim", "data/documents", "data/tokenizer", "data/shards",
              "data/loader", "data/prep", "dist", "doctor", "kernels", "h5", "support"],
    "parity": ["model", "optim", "dist", "kernels", "h5", "support"],
}
ALL_PARTS = list(ALLOWED)
# The program and the tests may use every part.
ALLOWED["cli"] = ALL_PARTS
ALLOWED["tests"] = ALL_PARTS + ["cli", "tests"]
# folder -> the part it is private to. The backends are kernels' own: the rooms above ask the device through
# kernels' public headers (kernels/ops.h, kernels/device.h), so a backend can change without them.
PRIVATE = {"kernels/cpu/": "kernels", "kernels/cuda/": "kernels"}
SOURCE_SUFFIXES = (".h", ".cpp", ".cu", ".cuh")
REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def part_of(path):
    """The part a repository-relative path belongs to, or None for paths outside the parts."""
    top = path.split("/", 1)[0]
    if top == "data":
        pieces = path.split("/")
        return "/".join(pieces[:2]) if len(pieces) > 2 else None
    return top if top in ALLOWED else None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else REPO)
    graph, problems = {}, []
    for top in sorted(set(p.split("/")[0] for p in ALLOWED)):
        for directory, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.relpath(os.path.join(directory, name), root)
                with open(os.path.join(root, path), encoding="utf-8") as f:
                    includes = INCLUDE.findall(f.read())
                graph[path] = [i for i in includes if os.path.exists(os.path.join(root, i))]
                source = part_of(path)
                for included in includes:
                    for folder, owner in PRIVATE.items():
                        if included.startswith(folder) and source not in (owner, "tests"):
                            problems.append(f"{path}: includes {included} ({folder} is private to {owner}/; "
                                            f"include {owner}/'s public headers instead)")
                    target = part_of(included)
                    if source is None or target is None or target == source:
                        continue
                    if target not in ALLOWED[source]:
                        problems.append(f"{path}: includes {included} ({source} may not depend on {target})")
    # File-level cycles: depth-first search with colours.
    colour, stack = {}, []

    def visit(node):
        colour[node] = "grey"
        stack.append(node)
        for child in graph.get(node, []):
            if colour.get(child) == "grey":
                cycle = stack[stack.index(child):] + [child]
                problems.append("include cycle: " + " -> ".join(cycle))
            elif child not in colour:
                visit(child)
        stack.pop()
        colour[node] = "black"

    sys.setrecursionlimit(10000)
    for node in sorted(graph):
        if node not in colour:
            visit(node)
    for problem in problems:
        print(problem)
    edges = sum(len(v) for v in graph.values())
    print(f"check_includes: {len(graph)} files, {edges} includes, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
