#!/usr/bin/env python3
"""cmake/CudaToolkit.cmake against CUDA releases this machine does not have: stand-in nvcc programs that
answer `--version` as CUDA 12.3, 12.4, 12.8 and 12.9 would, run through the functions in CMake's script mode.
Below 12.4 configuration stops naming the FP8 instruction; 12.4 to 12.8 build sm_90 alone by default, saying
why, and refuse an explicit 121; 12.9 builds both. (CI also configures with a real CUDA 12.4: scripts/check-gpu-build.sh.)"""
import argparse
import os
import re
import stat
import subprocess
import sys
import tempfile

DRIVER = """include("{module}")
nanoforge_cuda_architectures(architectures "${{NVCC}}" "${{REQUESTED}}")
message(STATUS "architectures: ${{architectures}} (CUDA ${{NANOFORGE_CUDA_VERSION}})")
"""

# (release, requested architectures, exit status 0?, phrases the output must hold, in order)
CASES = [
    ("12.3", "", False, ["nanoforge needs CUDA 12.4 or newer", "mma.sync.m16n8k32 on e4m3/e5m2 operands",
                         "PTX ISA 8.4", "-DNANOFORGE_CUDA=OFF"]),
    ("12.4", "", True, ["building for sm_90 only: the DGX Spark's GB10 (sm_121) needs CUDA 12.9 or newer",
                        "architectures: 90 (CUDA 12.4)"]),
    ("12.8", "90;121", False, ["CMAKE_CUDA_ARCHITECTURES=90;121: the DGX Spark's GB10 (sm_121) needs CUDA 12.9 "
                               "or newer", "-DCMAKE_CUDA_ARCHITECTURES=90"]),
    ("12.8", "90", True, ["architectures: 90 (CUDA 12.8)"]),
    ("12.9", "", True, ["architectures: 90;121 (CUDA 12.9)"]),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cmake", required=True)
    parser.add_argument("--source-dir", required=True)
    args = parser.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as scratch:
        driver = os.path.join(scratch, "driver.cmake")
        with open(driver, "w") as file:
            file.write(DRIVER.format(module=os.path.join(args.source_dir, "cmake", "CudaToolkit.cmake")))
        for release, requested, succeeds, phrases in CASES:
            nvcc = os.path.join(scratch, f"nvcc-{release}")
            with open(nvcc, "w") as file:
                file.write("#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
                           f"echo 'Cuda compilation tools, release {release}, V{release}.100'\n")
            os.chmod(nvcc, os.stat(nvcc).st_mode | stat.S_IEXEC)
            run = subprocess.run([args.cmake, f"-DNVCC={nvcc}", f"-DREQUESTED={requested}", "-P", driver],
                                 capture_output=True, text=True, check=False)
            # CMake wraps the text of its errors: compare with runs of white space made one space.
            output = re.sub(r"\s+", " ", run.stdout + run.stderr)
            label = f"CUDA {release}, CMAKE_CUDA_ARCHITECTURES='{requested}'"
            problems = []
            if (run.returncode == 0) != succeeds:
                problems.append(f"exit status {run.returncode}, expected {'0' if succeeds else 'an error'}")
            position = 0
            for phrase in phrases:
                found = output.find(phrase, position)
                if found < 0:
                    problems.append(f"missing (in order): {phrase!r}")
                else:
                    position = found + len(phrase)
            for problem in problems:
                print(f"{label}: {problem}\n  output: {output}", file=sys.stderr)
            failures += bool(problems)
            if not problems:
                print(f"{label}: as expected")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
