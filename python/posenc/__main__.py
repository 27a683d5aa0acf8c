"""`python -m posenc inspect CONFIG.json [--seq-len N] [--format table|json]`: a model's per-layer
positional plan, the same text as the C++ CLI's `posenc inspect` (posenc/model_report.h), for users of
the Python package alone. The CLI's other commands (encode, attention, analyze, lab) are in the C++
tool (README, "The command line")."""
from __future__ import annotations

import argparse
import sys

from . import Error
from .model import ModelPositions


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m posenc")
    commands = parser.add_subparsers(dest="command", required=True)
    inspect = commands.add_parser("inspect",
                                  help="a model's per-layer positional plan from its HF config.json")
    inspect.add_argument("config", help="config.json of a HuggingFace model")
    inspect.add_argument("--seq-len", type=int, default=0,
                         help="length for inv_freq/attention_factor (default: max_position_embeddings)")
    inspect.add_argument("--format", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    try:
        if args.seq_len < 0:
            raise Error(f"--seq-len = {args.seq_len} is invalid: must be > 0")
        m = ModelPositions.from_hf(args.config, warn=False)
        if args.format == "json":
            sys.stdout.write(m.report_json(args.seq_len) + "\n")  # warnings are in the document
        else:
            for w in m.warnings:
                sys.stderr.write(f"posenc: warning: {w}\n")
            sys.stdout.write(m.report_table(args.seq_len))
    except Error as exc:
        sys.stderr.write(f"posenc: error: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
