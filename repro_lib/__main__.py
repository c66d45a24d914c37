"""Command line: ``python -m repro_lib run [NOTEBOOK …] --profile P [-p name value …]``."""
from __future__ import annotations

import argparse
import sys
import time

from .notebook import NotebookFailed, notebooks_in, parse_value, run_notebook


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m repro_lib")
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="execute notebooks with papermill into <results_dir>/<profile>/")
    run.add_argument("notebooks", nargs="*", help="notebook paths (default: every notebooks/*.ipynb)")
    run.add_argument("--profile", default="cpu", choices=["smoke", "cpu", "gpu", "paper"])
    run.add_argument("--results-dir", default="results")
    run.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                     help="notebook parameter (repeatable), e.g. -p data_root /data -p dataset cifar10-jpeg")
    run.add_argument("--keep-going", action="store_true", help="run the remaining notebooks after a failure")
    args = ap.parse_args(argv)

    paths = args.notebooks or [str(p) for p in notebooks_in()]
    params = {k: parse_value(v) for k, v in args.p}
    failed = []
    for i, path in enumerate(paths, 1):
        t0 = time.time()
        print(f"[{i}/{len(paths)}] {path} (profile={args.profile})", flush=True)
        try:
            out = run_notebook(path, args.profile, params, args.results_dir)
        except NotebookFailed as e:
            print(f"FAILED {e}", file=sys.stderr, flush=True)
            failed.append(path)
            if not args.keep_going:
                return 1
            continue
        print(f"    done in {time.time() - t0:.0f} s -> {out}", flush=True)
    if failed:
        print(f"{len(failed)} notebook(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
