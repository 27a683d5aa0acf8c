#!/usr/bin/env bash
# cmake/nvcc_report.sh [launcher] nvcc ARGS...: runs the compile (through ccache when given) and copies
# what it printed on stderr (ptxas's -v resource report: registers, stack frame, spill stores and loads
# per kernel) to <object>.ptxas beside the object named by -o, for tests/cuda/ptxas_report.py.
set -uo pipefail
out=""
prev=""
for arg in "$@"; do
  [ "$prev" = "-o" ] && out="$arg"
  prev="$arg"
done
if [ -z "$out" ]; then
  exec "$@"
fi
log="${out}.ptxas"
"$@" 2> >(tee "$log" >&2)
status=$?
wait
exit $status
