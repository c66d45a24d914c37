"""Command line.

* ``python -m repro_lib run [NOTEBOOK …] --profile P [-p name value …]``: execute notebooks with papermill (every
  notebook, or those named: a path or a name in ``notebooks/``); a failing notebook does not stop the others; a
  table at the end (status, minutes, verdict, executed notebook); exit status 1 if any failed;
* ``python -m repro_lib summary [reports/] [--readme README.md [--check]]``: the results table of the published
  notebooks (``repro_lib.results.publish``), printed or written into the README;
* ``python -m repro_lib report [reports/] [NOTEBOOK …]``: re-render the published notebooks from their store
  (``-p collect True``: nothing trains), then the README's results table;
* ``python -m repro_lib sweep NOTEBOOK --profile P --executor {local,slurm} […]``: submit the notebook's grid as
  one submitit job array (``repro_lib.runs.cluster``); then ``run NOTEBOOK -p collect True`` renders it;
* ``python -m repro_lib tune --n N --batch-size B --lr LR --momentum MU (--weight-decay WD | --tuning-factor TF)
  [--to-n N2 --to-batch-size B2 --to-momentum MU2]``: the tuning factor of Yun et al. Eq. 27, its relaxation time
  and expected angular update per epoch, and the weight decay (or LR) that keeps it at another N, B or μ
  (``repro_lib.tuning``);
* ``python -m repro_lib site [reports/] [--out site]``: the published notebooks as one static website, read like a
  book (``repro_lib.runs.site``; nothing is executed): the results table, the theory, a chapter per paper, search;
* ``python -m repro_lib window [--budget-s S --store reports --out DIR --data-root gpu_data …]``: the budgeted GPU
  window (``repro_lib.runs.window``): train what the store lacks of the Yun et al. paper-protocol queue within
  ``--budget-s`` seconds, stopping between epochs; ``--plan-only`` prints the queue, ``--tidy`` drops the files of
  runs finished since, ``--pack-data --data-root <folder holding cifar10-jpeg>`` writes the data file it carries
  (``gpu_data/cifar10-jpeg-window.pt``). Imports no papermill (the GPU machine's own torch is enough).
* ``python -m repro_lib data cifar10-jpeg [--root DIR] [--no-download] [--force]``: build the CIFAR-10 JPEG
  stand-in from CIFAR-10 (``repro_lib.data_build``), then compare it with the published folder;
  ``python -m repro_lib data verify cifar10-jpeg [--root DIR]``: that comparison alone (exit status 0: identical,
  1: it differs, and where; 2: a usage error or missing data, in one line).
"""
from __future__ import annotations

import argparse
import math
import sys

from .runs.notebook import RUN_DEFAULTS, find_notebooks, run_notebooks, split_parameters, summary_table


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["tune"]:
        argv = ["tune", *_tune_argv(argv[1:])]
    if argv[:1] == ["window"]:  # every option is the window's own (``python -m repro_lib window --help``)
        from .runs import window

        window.main(argv[1:])
        return 0
    if argv[:1] == ["data"]:  # ``python -m repro_lib data --help``
        return data_command(argv[1:])
    if argv[:1] == ["site"]:  # ``python -m repro_lib site --help``
        from .runs import site

        return site.main(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m repro_lib")
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="execute notebooks with papermill into <results_dir>/<profile>/")
    run.add_argument("notebooks", nargs="*",
                     help="notebook paths or names, e.g. yun2022_table1 (default: every notebooks/*.ipynb)")
    run.add_argument("--profile", default="cpu", choices=["smoke", "cpu", "gpu", "paper"])
    run.add_argument("--results-dir", default="results")
    run.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                     help="notebook parameter (repeatable), e.g. -p data_root /data -p dataset cifar10-jpeg")
    run.add_argument("--keep-going", action="store_true",
                     help="run the remaining notebooks after a failure (the default; kept for old scripts)")
    run.add_argument("--fail-fast", action="store_true", help="stop at the first failing notebook")
    sw = sub.add_parser("sweep", help="submit a notebook's grid to a cluster (submitit job array) into the store")
    sw.add_argument("notebook", help="notebook path, e.g. notebooks/yun2022_table2.ipynb")
    sw.add_argument("--profile", default="cpu", choices=["smoke", "cpu", "gpu", "paper"])
    sw.add_argument("--executor", default="local", choices=["local", "slurm"],
                    help="slurm: sbatch job array; local: subprocesses of this machine")
    sw.add_argument("--results-dir", default="results", help="the shared results store (same as `run`'s)")
    sw.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="notebook parameter (repeatable), as for `run`: it changes the grid as in the notebook")
    sw.add_argument("--partition", default=None, help="SLURM partition")
    sw.add_argument("--gpus-per-job", type=int, default=None, help="GPUs per job (default: 1 on slurm, 0 local)")
    sw.add_argument("--cpus-per-task", type=int, default=None, help="CPU cores per job (SLURM)")
    sw.add_argument("--timeout-min", type=int, default=240, help="wall time per job; a timed-out job is requeued")
    sw.add_argument("--max-parallel", type=int, default=0,
                    help="jobs running at once (slurm: array throttle, 0 = no limit; local: default 1)")
    sw.add_argument("--max-members", type=int, default=None,
                    help="runs per job trained as one stacked model (default: the notebook's)")
    sw.add_argument("--max-requeues", type=int, default=20, help="timeouts after which a job is not requeued")
    sw.add_argument("--slurm-arg", nargs=2, action="append", default=[], metavar=("OPTION", "VALUE"),
                    help="any other sbatch option, e.g. --slurm-arg account myproj --slurm-arg qos high")
    sw.add_argument("--log-dir", default=None, help="submitit logs and pickles (default: <results-dir>/submitit)")
    sw.add_argument("--dry-run", action="store_true", help="print the groups (and sbatch script); submit nothing")
    sw.add_argument("--wait", action="store_true", help="wait for the jobs and print their outcome")
    sm = sub.add_parser("summary", help="the results table of the published notebooks (reports/) in Markdown")
    sm.add_argument("reports", nargs="?", default="reports")
    sm.add_argument("--readme", default=None, help="write the table into this README's results block")
    sm.add_argument("--check", action="store_true", help="with --readme: exit 1 if the block is not current")
    rp = sub.add_parser("report", help="re-render the published notebooks from their store (reports/) without "
                                       "training, then the README's results table")
    rp.add_argument("reports", nargs="?", default="reports")
    rp.add_argument("notebooks", nargs="*", help="only these published notebooks (names)")
    rp.add_argument("--readme", default="README.md", help="results table to update ('' to leave the README alone)")
    add_tune_parser(sub)
    sub.add_parser("data", add_help=False,
                   help="build the CIFAR-10 JPEG stand-in from CIFAR-10, or verify a folder against the published "
                        "one (`python -m repro_lib data --help`)")
    sub.add_parser("site", add_help=False,
                   help="build the static website of the published notebooks (reports/) into site/, nothing "
                        "executed (`python -m repro_lib site --help`)")
    sub.add_parser("window", add_help=False,
                   help="the budgeted GPU window: train what the store lacks of the paper-protocol queue within a "
                        "time budget (`python -m repro_lib window --help`)")
    args = ap.parse_args(argv)
    if args.cmd == "sweep":
        return sweep(args)
    if args.cmd == "summary":
        from .runs import published

        return published.main([args.reports, *(["--readme", args.readme] if args.readme else []),
                               *(["--check"] if args.check else [])])
    if args.cmd == "report":
        return report(args)
    if args.cmd == "tune":
        return tune(args)

    try:  # every name, -p name and -p value checked against the notebooks before anything runs
        paths = find_notebooks(args.notebooks)
        per_notebook = split_parameters(paths, dict(args.p), defaults=RUN_DEFAULTS)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    def log(text, error=False):
        print(text, file=sys.stderr if error else sys.stdout, flush=True)

    outcomes = run_notebooks(paths, args.profile, per_notebook, args.results_dir, fail_fast=args.fail_fast,
                             log=log)
    print("\n" + summary_table(outcomes), flush=True)
    failed = [o.notebook for o in outcomes if o.status != "ok"]
    if failed:
        print(f"{len(failed)} notebook(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


# ------------------------------------------------------------------------------------------- tune
TUNE_EXAMPLE = """\
example (Yun et al. 2022, Table 1: CIFAR-10, N = 50,000, B = 128, eta = 0.1, mu = 0.9, the factor 10/128):
  python -m repro_lib tune --n 50000 --batch-size 128 --lr 0.1 --momentum 0.9 --tuning-factor 10/128
    -> weight decay 0.0002
  python -m repro_lib tune --n 50000 --batch-size 128 --lr 0.1 --momentum 0.9 --weight-decay 2e-4 --to-batch-size 512
    -> tuning factor 0.078125 (10/128); at B = 512 weight decay 0.0008 (or learning rate 0.4)
  python -m repro_lib tune --optimizer adamw --n 50000 --batch-size 128 --lr 1e-3 --weight-decay 0.05
    -> AdamW's factor N*lr*wd/B = 0.0195

B is the global batch (per-device batch x devices x gradient-accumulation steps); with warmup or a cosine or step
schedule, lr is the initial (peak) one, as the paper's Tables 1-6 quote it.
"""
#: the options of ``tune`` that take a value (a negative number after one is its value, not an option)
_TUNE_VALUED = ("--n", "--batch-size", "--lr", "--momentum", "--weight-decay", "--tuning-factor", "--to-n",
                "--to-batch-size", "--to-momentum", "--optimizer", "--beta1")


def _tune_argv(argv: list[str]) -> list[str]:
    """``--weight-decay -2e-4`` as ``--weight-decay=-2e-4``: argparse reads a token with an exponent and a leading
    minus as an option, so the value reaches the range check and its one-line message instead."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in _TUNE_VALUED and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            try:
                float(argv[i + 1].replace("_", "").split("/")[0])
                out.append(f"{argv[i]}={argv[i + 1]}")
                i += 2
                continue
            except ValueError:
                pass
        out.append(argv[i])
        i += 1
    return out


def _number(text: str) -> float:
    """A finite number (argparse type of the numeric ``tune`` options)."""
    try:
        v = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return v


def _tuning_factor_value(text: str) -> float:
    """A number or a fraction such as ``10/128`` (argparse type of ``--tuning-factor``)."""
    from fractions import Fraction

    try:
        v = float(Fraction(text.replace("_", "")))
    except (ValueError, ZeroDivisionError, OverflowError):
        raise argparse.ArgumentTypeError(f"not a finite number or a fraction such as 10/128: {text!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"not a finite number or a fraction such as 10/128: {text!r}")
    return v


def _one_line_error(parser: argparse.ArgumentParser):
    def error(message: str):
        print(f"error: {message} (python -m repro_lib tune --help)", file=sys.stderr)
        sys.exit(2)
    return error


def add_tune_parser(sub) -> None:
    tp = sub.add_parser("tune", help="the tuning factor N*lr*wd/(B(1-momentum)) of Yun et al. (Eq. 27) and the weight "
                                     "decay that keeps it at another N, B or momentum",
                        description="The tuning factor N*lr*wd/(B(1-momentum)) of SGD (AdamW: N*lr*wd/B; Yun et al. "
                                    "2022, Eq. 27), the relaxation time of the weight norm in epochs (1/(4 TF) for "
                                    "SGD, 1/(2 TF) for AdamW), the angle per step at equilibrium (sqrt(2 lr wd/(1+mu)) "
                                    "for SGD) and the angular update per epoch arccos(1-TF), the "
                                    "first-order reading of Eq. 27; with --to-*, the weight decay (or, alternatively, "
                                    "the learning rate) that keeps the factor. A bad value is refused in one line "
                                    "naming the option (exit status 2).",
                        epilog=TUNE_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    tp.error = _one_line_error(tp)
    tp.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw"],
                    help="sgd: torch.optim.SGD, coupled L2 weight decay, PyTorch momentum (the paper's); adamw: "
                         "torch.optim.AdamW, decoupled decay w(1 - lr*wd) (default: sgd)")
    tp.add_argument("--n", type=_number, required=True, help="training images N (one epoch)")
    tp.add_argument("--batch-size", type=_number, required=True,
                    help="global batch size B: per-device batch x devices x gradient-accumulation steps")
    tp.add_argument("--lr", type=_number, required=True,
                    help="learning rate eta per step; under warmup / cosine / step decay the initial (peak) one")
    tp.add_argument("--momentum", type=_number, default=None,
                    help="momentum mu in [0, 1) (0: plain SGD); required with --optimizer sgd, not used by adamw")
    tp.add_argument("--beta1", type=_number, default=None,
                    help="AdamW's beta1 in [0, 1), for the angle per step only (default 0.9, torch's); not used by sgd")
    given = tp.add_mutually_exclusive_group(required=True)
    given.add_argument("--weight-decay", type=_number, help="weight decay lambda: print its tuning factor")
    given.add_argument("--tuning-factor", type=_tuning_factor_value,
                       help="a tuning factor, e.g. 10/128: print the weight decay that gives it")
    tp.add_argument("--to-n", type=_number, help="another N: the weight decay / LR that keep the factor there")
    tp.add_argument("--to-batch-size", type=_number, help="another B: the weight decay / LR that keep the factor there")
    tp.add_argument("--to-momentum", type=_number, help="another mu: the weight decay / LR that keep the factor there")


def _g(v: float) -> str:
    """A number as the command line prints it: 50,000, 128, 0.1, 0.0002."""
    return f"{v:,.0f}" if float(v).is_integer() and abs(v) >= 1 else f"{v:.6g}"


def _published_angles(optimizer: str = "sgd") -> list[str]:
    """What the published runs of the tutorial measured with ``optimizer``: per epoch as a fraction of their own
    arccos(1 - TF), and a joint group's angle per step beside its prediction (read from ``reports/``; none where
    it is not there, and none for an optimizer the published runs did not use)."""
    try:
        from .papers.yun2022 import tuning_rule_report

        return [line for line in (tuning_rule_report.published_angle_ratios(optimizer=optimizer),
                                  tuning_rule_report.published_step_angles(optimizer=optimizer)) if line]
    except Exception:  # noqa: BLE001 -- a reference line, not needed for the numbers above it
        return []


def tune(args) -> int:
    """``python -m repro_lib tune``: print, or on a bad value say which option is wrong (exit 2, no traceback)."""
    from . import profiles, tuning

    adamw = args.optimizer == "adamw"
    options = {"n": "--n", "batch_size": "--batch-size", "lr": "--lr", "momentum": "--momentum",
               "weight_decay": "--weight-decay", "tuning_factor": "--tuning-factor", "optimizer": "--optimizer"}
    to_given = {k: getattr(args, "to_" + k) for k in ("n", "batch_size", "momentum")
                if getattr(args, "to_" + k) is not None}

    def call(fn, names=options, **kw):
        try:
            return fn(**kw)
        except ValueError as e:
            name, _, why = str(e).partition(": ")
            raise ValueError(f"{names.get(name, name)}: {why}") from None

    try:  # everything is computed (and so checked) before anything is printed
        if args.momentum is None and not adamw:
            raise ValueError("--momentum: required with --optimizer sgd (0 for plain SGD)")
        if adamw and (args.momentum or to_given.get("momentum")):
            raise ValueError(f"--{'to-' if not args.momentum else ''}momentum: AdamW's decoupled decay does not "
                             "involve momentum (leave it out)")
        if args.beta1 is not None and not adamw:
            raise ValueError("--beta1: AdamW's only (SGD's angle per step uses --momentum)")
        beta1 = 0.9 if args.beta1 is None else args.beta1
        momentum = 0.0 if args.momentum is None else args.momentum
        at = dict(n=args.n, batch_size=args.batch_size, momentum=momentum, optimizer=args.optimizer)
        if args.weight_decay is not None:
            tf = call(tuning.tuning_factor, lr=args.lr, weight_decay=args.weight_decay, **at)
            wd = args.weight_decay
        else:
            wd = call(tuning.weight_decay_for, tuning_factor=args.tuning_factor, lr=args.lr, **at)
            tf = args.tuning_factor
        relax = call(tuning.relaxation_epochs, tuning_factor=tf, optimizer=args.optimizer)
        step = (call(tuning.angular_update_per_step, {**options, "beta1": "--beta1"}, lr=args.lr, weight_decay=wd,
                     momentum=None if adamw else momentum, optimizer=args.optimizer, beta1=beta1) if wd > 0 else 0.0)
        turn = tuning.angular_update_per_epoch(tf) if tf <= 2 else math.nan
        if to_given:
            to = {**at, **to_given}
            to_names = {**options, **{k: f"--to-{k.replace('_', '-')}" for k in to_given}}
            if "batch_size" in to_given and "n" not in to_given:
                to_names["n"] = "--to-batch-size"  # B > N at the new batch: the new batch is what is wrong
            new_wd = call(tuning.weight_decay_for, to_names, tuning_factor=tf, lr=args.lr, **to)
            new_lr = call(tuning.lr_for, to_names, tuning_factor=tf, weight_decay=wd, **to) if wd > 0 else math.nan
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    formula = "N*lr*wd/B (AdamW, decoupled)" if adamw else "N*lr*wd/(B(1-momentum))"
    print(f"N = {_g(args.n)} images, B = {_g(args.batch_size)} images per step (global), lr = {_g(args.lr)} "
          + ("per step, " if adamw else f"per step, momentum = {_g(momentum)}, ") + f"weight decay = {_g(wd)}")
    print(f"tuning factor {formula} = {tf:.6g} ({_g(tf * 128)}/128; Eq. 27, dimensionless)")
    if math.isfinite(relax):
        settle = profiles.SETTLE_YELLOW * profiles.relaxation_epochs(tf) if not adamw else math.nan
        print(f"relaxation time of the weight norm 1/({'2' if adamw else '4'} TF) = {relax:.3g} epochs"
              + (f"; the package's shrink rule keeps at least {profiles.SETTLE_YELLOW:g}/(2 TF) = {settle:.3g} epochs "
                 f"({settle / relax:.2g} relaxation times) before the first LR decay" if not adamw else ""))
    else:
        print("relaxation time: none (tuning factor 0: nothing pulls the weight norm back)")
    formula = "sqrt(2 lr wd (1-beta1)/(1+beta1))" if adamw else "sqrt(2 lr wd/(1+momentum))"
    print(f"angle per step at equilibrium {formula} = {step:.4g} rad ({math.degrees(step):.3g} deg)"
          + (f", beta1 = {_g(beta1)}" if adamw else "") + " for each scale-invariant tensor or joint group")
    if math.isfinite(turn):
        print(f"angular update per epoch arccos(1 - TF) = {turn:.4g} rad ({math.degrees(turn):.3g} deg) per epoch: "
              "the first-order reading of Eq. 27, a reference (measured runs turn less)")
        caveat = tuning.first_order_caveat(tf)
        if caveat:
            print(f"  caveat: {caveat}")
    else:
        print("angular update per epoch: arccos(1 - TF) is undefined above TF = 2 (Eq. 27 does not apply)")
    for line in _published_angles(args.optimizer):
        print(f"  {line}")
    if to_given:
        print(f"at N = {_g(to['n'])}, B = {_g(to['batch_size'])}"
              + ("" if adamw else f", momentum = {_g(to['momentum'])}") + " the factor is kept by")
        print(f"  weight decay {_g(new_wd)} (at lr {_g(args.lr)})")
        if math.isfinite(new_lr):
            print(f"  or learning rate {_g(new_lr)} per step (at weight decay {_g(wd)})")
    return 0


# ------------------------------------------------------------------------------------------- data
DATA_EXAMPLE = """\
examples:
  python -m repro_lib data cifar10-jpeg --root data          # data/cifar10-jpeg from data/cifar-10-batches-py
  python -m repro_lib data verify cifar10-jpeg --root data   # exit status 0: identical to the published folder

The build downloads CIFAR-10 with torchvision (MD5-checked) when data/cifar-10-batches-py is missing, writes
data/cifar10-jpeg/{train,test}/<class>/NNNN.jpg (renamed into place when whole; a second build leaves it alone),
then compares it with the folder the published records trained on. Identical bytes: re-training gives the published
numbers bit for bit on the CPU and thread count a record names. Otherwise the same protocol on slightly different
pixels: numbers within the seed noise of the published ones.
"""


def data_command(argv: list[str]) -> int:
    """``python -m repro_lib data [verify] DATASET``: build or verify; a usage error or missing data is one line on
    stderr with exit status 2; verify exits 1 when the folder differs."""
    from . import data, data_build

    ap = argparse.ArgumentParser(prog="python -m repro_lib data", usage="%(prog)s [verify] cifar10-jpeg "
                                 "[--root DIR] [--no-download] [--force] [--quiet]",
                                 description="Build the CIFAR-10 JPEG stand-in (cifar10-jpeg) from CIFAR-10's python "
                                             "version, or (verify) compare a folder with the one the published "
                                             "records trained on.",
                                 epilog=DATA_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)

    def error(message: str):
        print(f"error: {message} (python -m repro_lib data --help)", file=sys.stderr)
        sys.exit(2)

    ap.error = error
    ap.add_argument("words", nargs="+", metavar="[verify] cifar10-jpeg")
    ap.add_argument("--root", default=None, metavar="DIR", help="the data root holding cifar-10-batches-py/ and cifar10-jpeg/ "
                                                 "(default: $REPRO_DATA_ROOT, else ./data)")
    ap.add_argument("--no-download", action="store_true",
                    help="do not download CIFAR-10 when DIR/cifar-10-batches-py is missing: stop and say so")
    ap.add_argument("--force", action="store_true", help="rebuild an existing cifar10-jpeg folder (replaced when "
                                                         "the new one is whole)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    verify = args.words[0] == "verify"
    names = args.words[1:] if verify else args.words
    if len(names) != 1 or names[0] != data_build.DATASET:
        error(f"expected {'verify ' if verify else ''}{data_build.DATASET}, got {' '.join(args.words)!r} (the one "
              f"dataset this command builds)")
    if verify and (args.no_download or args.force):
        error("--no-download and --force are options of the build, not of verify")
    root = data.data_root(args.root)
    try:
        if not verify:
            built = data_build.build_cifar10_jpeg(root, download=not args.no_download, force=args.force,
                                                  progress=not args.quiet)
            print(built.text(), flush=True)
        result = data_build.verify(root / data_build.DATASET)
    except (data_build.BuildError, OSError) as e:
        print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    print(result.text(), flush=True)
    return 0 if result.identical or not verify else 1


def report(args) -> int:
    from .runs import published
    from .runs.notebook import summary_table

    outcomes = published.rerender(args.reports, args.notebooks or None)
    print("\n" + summary_table(outcomes), flush=True)
    if args.readme:
        published.main([args.reports, "--readme", args.readme])
    failed = [o.notebook for o in outcomes if o.status != "ok"]
    if failed:
        print(f"{len(failed)} notebook(s) failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def sweep(args) -> int:
    from .runs import cluster

    try:
        (typed,) = split_parameters([args.notebook], dict(args.p)) if args.p else ({},)
        params = cluster.notebook_parameters(args.notebook, typed)
        plans = cluster.notebook_plans(args.notebook, args.profile, params)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    max_members = args.max_members or cluster.default_max_members(args.notebook, args.profile)
    slurm = dict(partition=args.partition, cpus_per_task=args.cpus_per_task,
                 name=f"repro_{args.profile}_{args.notebook.rsplit('/', 1)[-1].removesuffix('.ipynb')}",
                 extra=dict(args.slurm_arg)) if args.executor == "slurm" else {}
    sub = cluster.submit(plans, args.results_dir, executor=args.executor, max_members=max_members,
                         max_parallel=args.max_parallel, gpus_per_job=args.gpus_per_job, timeout_min=args.timeout_min,
                         data_root=params.get("data_root") or None, download=bool(params.get("download", False)),
                         log_dir=args.log_dir, dry_run=args.dry_run, max_requeues=args.max_requeues, **slurm)
    if args.dry_run:
        for j, groups in enumerate(sub.per_job):
            for g in groups:
                c = g[0]
                print(f"job {j}: {len(g)} run(s) {c.model} n={c.n} B={c.batch_size} epochs={c.num_epochs}: "
                      + " ".join(f"lr={x.lr:g}/wd={x.weight_decay:g}/seed={x.seed}" for x in g))
        if sub.sbatch:
            print(sub.sbatch)
    else:
        print("job ids:", " ".join(j.job_id for j in sub.jobs) if sub.jobs else "none")
    print(("dry run: " if args.dry_run else "") + sub.summary(), flush=True)
    if args.wait and sub.jobs:
        failed = 0
        for job in sub.jobs:
            try:
                out = job.result()
                print(f"job {job.job_id}: {len(out)} runs " + str({s: sum(r['status'] == s for r in out)
                                                                   for s in {r['status'] for r in out}}))
            except Exception as e:  # a failed job: its log is in the submitit folder
                failed += 1
                print(f"job {job.job_id} FAILED: {str(e).splitlines()[0] if str(e) else type(e).__name__} "
                      f"(log: {job.paths.stderr})", file=sys.stderr)
        return 1 if failed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
