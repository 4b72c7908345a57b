#!/usr/bin/env python3
"""The registers, static shared memory and spills of every CUDA kernel, from ptxas itself, as the Markdown page
docs/kernel-resources.md (regenerate it with `python3 tools/dev/kernel_resources.py > docs/kernel-resources.md`):
each kernels/cuda/*.cu is compiled to a cubin with `nvcc -Xptxas -v` for each architecture (the Release build's
flags: -O3 -DNDEBUG, C++20, the repository on the include path) and ptxas's report of each kernel is read back.

    python3 tools/dev/kernel_resources.py [--arch 90 --arch 121] [--nvcc nvcc] [--jobs N]

Needs nvcc (no GPU); standard library only. Dynamic shared memory is a launch's choice, not the kernel's: not listed.
"""
import argparse
import concurrent.futures
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FUNCTION = re.compile(r"ptxas info\s*: Compiling entry function '([^']+)' for 'sm_(\d+)'")
PROPERTIES = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers(?:, used \d+ barriers)?(?:, (\d+) bytes smem)?")


def compile_report(nvcc, source, arch):
    """ptxas's lines for one .cu file and architecture."""
    with tempfile.TemporaryDirectory() as scratch:
        command = [nvcc, "-cubin", f"-arch=sm_{arch}", "-O3", "-DNDEBUG", "-std=c++20", "-DFMT_SHARED",
                   "-DFMT_USE_CONSTEXPR=1", "-I", ROOT, "-Xptxas", "-v", "-o",
                   os.path.join(scratch, "kernel.cubin"), source]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr}")
        return result.stderr


def demangle(names):
    result = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
    return result.stdout.splitlines()


def parse(report):
    """{mangled kernel: (registers, static smem bytes, spill stores, spill loads)} of one ptxas report."""
    kernels, current, spills = {}, None, (0, 0)
    for line in report.splitlines():
        match = FUNCTION.search(line)
        if match:
            current = match.group(1)
            continue
        match = PROPERTIES.search(line)
        if match and current:
            spills = (int(match.group(2)), int(match.group(3)))
            continue
        match = USED.search(line)
        if match and current:
            kernels[current] = (int(match.group(1)), int(match.group(2) or 0)) + spills
            current, spills = None, (0, 0)
    return kernels


def short_name(demangled):
    """The kernel's name and template arguments, without its return type, namespaces and parameters."""
    name = demangled.replace("(anonymous namespace)::", "")
    if name.endswith(")"):  # the parameter list: from the parenthesis that closes it back to its match
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                name = name[:i]
                break
    name = re.sub(r"^void ", "", name)
    return re.sub(r"\b[A-Za-z_]\w*::", "", name)  # namespaces


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", action="append", help="compute capability without the dot (default 90, 121)")
    parser.add_argument("--nvcc", default="nvcc")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    arguments = parser.parse_args()
    archs = arguments.arch or ["90", "121"]
    sources = sorted(glob.glob(os.path.join(ROOT, "kernels", "cuda", "*.cu")))
    tables = {arch: {} for arch in archs}
    with concurrent.futures.ThreadPoolExecutor(arguments.jobs) as pool:
        jobs = {pool.submit(compile_report, arguments.nvcc, source, arch): (source, arch)
                for source in sources for arch in archs}
        for job in concurrent.futures.as_completed(jobs):
            source, arch = jobs[job]
            for kernel, numbers in parse(job.result()).items():
                tables[arch][kernel] = (os.path.basename(source),) + numbers
    mangled = sorted(set().union(*(table.keys() for table in tables.values())))
    names = dict(zip(mangled, demangle(mangled)))
    version = subprocess.run([arguments.nvcc, "--version"], capture_output=True, text=True).stdout
    release = re.search(r"release ([\d.]+)", version)
    print("# Registers, shared memory and spills of every CUDA kernel\n")
    print(f"Written by `python3 tools/dev/kernel_resources.py` from ptxas's own report (`nvcc -Xptxas -v`, CUDA "
          f"{release.group(1) if release else '?'},\nthe Release build's flags), never by hand: registers per "
          "thread, static shared memory per block (the flash\nattention's and the MLP GEMM's tiles are dynamic "
          "shared memory, a launch's choice: [kernels](kernels.md)), and spills\nto local memory.\n")
    header = "| file | kernel | " + " | ".join(f"sm_{arch} registers / smem / spills" for arch in archs) + " |"
    print(header)
    print("|---|---|" + "---:|" * len(archs))
    rows = []
    for kernel in mangled:
        source = next(tables[arch][kernel][0] for arch in archs if kernel in tables[arch])
        cells = []
        for arch in archs:
            if kernel not in tables[arch]:
                cells.append("-")
                continue
            _, registers, smem, stores, loads = tables[arch][kernel]
            spill = "none" if stores == loads == 0 else f"{stores} B stored, {loads} B loaded"
            cells.append(f"{registers} / {smem} B / {spill}")
        rows.append((source, short_name(names[kernel]), cells))
    for source, name, cells in sorted(rows):
        print(f"| {source} | `{name}` | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
