#!/usr/bin/env python3
"""tests/cuda/ptxas_report.py BUILD_DIR: fails when a CUDA kernel spills registers or has a stack frame, or
when ptxas changed a wgmma pipeline as written (messages C75xx: wgmma serialized, or a warpgroup wait or
arrive injected, which mean the tensor cores' products do not overlap as the code intends).

cmake/nvcc_report.sh keeps ptxas's -v report of every CUDA object as <object>.ptxas. A kernel that spills,
or keeps an array in local memory (a stack frame: an index the compiler could not resolve), reads and
writes local memory in its loop; that is visible to the compiler, so it is checked here, without a GPU.
Also fails if no report is found (the check would assert nothing).
"""
import pathlib
import re
import sys

FUNCTION = re.compile(r"Function properties for (\S+)")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
WGMMA = re.compile(r"\((C75\d\d)\) (.*?) in (the )?function '(\S+)'")


def main(build_dir: str) -> int:
    reports = sorted(pathlib.Path(build_dir).rglob("*.ptxas"))
    if not reports:
        print(f"no ptxas reports under {build_dir}: was the CUDA backend built through cmake/nvcc_report.sh?")
        return 1
    kernels, bad = 0, []
    for report in reports:
        function = None
        for line in report.read_text().splitlines():
            if m := WGMMA.search(line):
                bad.append(f"{report.name}: {m.group(4)}: {m.group(1)} {m.group(2)}")
            elif m := FUNCTION.search(line):
                function = m.group(1)
            elif (m := FRAME.search(line)) and function:
                kernels += 1
                stack, stores, loads = map(int, m.groups())
                if stack or stores or loads:
                    bad.append(f"{report.name}: {function}: {stack} B stack, {stores} B spill stores, "
                               f"{loads} B spill loads")
                function = None
    print(f"{kernels} functions in {len(reports)} reports")
    if kernels == 0:
        print("the reports name no function: ptxas -v did not run")
        return 1
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
