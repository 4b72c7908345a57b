#!/usr/bin/env python3
"""The program `make` builds where nvcc is found is the GPU build, also on a machine without a GPU (a login
node): never the CPU emulator of CUDA, which only nanoforge-emulated, the tests' program, links. Checks what
bin/nanoforge says of itself (--version), which shared libraries it needs (NVIDIA's cuBLASLt and NCCL, and
never the driver's libcuda.so.1: a program that needs it does not start where no NVIDIA driver is installed)
and that none of the emulator's code is in it. Run by CTest in trees with the real GPU build."""
import argparse
import subprocess
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nanoforge", required=True, help="the product program, build/bin/nanoforge")
    args = parser.parse_args()
    problems = []

    version = subprocess.run([args.nanoforge, "--version"], capture_output=True, text=True, check=False)
    text = version.stdout + version.stderr
    if version.returncode != 0:
        problems.append(f"--version exited {version.returncode} (a GPU build must run without a GPU):\n{text}")
    if "GPU build for sm" not in text:
        problems.append(f"--version does not say it is the GPU build ('GPU build for sm ...'):\n{text}")
    if "EMULATOR" in text.upper():
        problems.append(f"--version names the CUDA emulator:\n{text}")

    dynamic = subprocess.run(["readelf", "--dynamic", args.nanoforge], capture_output=True, text=True,
                             check=True).stdout
    needed = [line.split("[", 1)[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line]
    for library in ("libcublasLt.so", "libnccl.so"):
        if not any(name.startswith(library) for name in needed):
            problems.append(f"it does not link NVIDIA's {library} (needs: {', '.join(needed)})")
    if any(name.startswith("libcuda.so") for name in needed):
        problems.append("it needs the driver's libcuda.so.1, so it would not start without the NVIDIA driver")

    symbols = subprocess.run(["nm", "--demangle", "--defined-only", args.nanoforge], capture_output=True,
                             text=True, check=True).stdout
    emulated = [line for line in symbols.splitlines() if "nanoforge::emulator::" in line]
    if emulated:
        problems.append(f"{len(emulated)} symbols of the CUDA emulator are in it, e.g. {emulated[0]}")

    for problem in problems:
        print(f"check_product_program: {args.nanoforge}: {problem}", file=sys.stderr)
    if not problems:
        print(f"check_product_program: {args.nanoforge} is the GPU build; --version says:\n{text}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
