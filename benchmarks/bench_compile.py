"""``compile=True`` vs eager on CPU for ``train.fit`` and a 3-member ``batched.fit_many`` (the seeds of one cell).

Model and data as the ``cpu`` profile's Table 1 runs: the scale-invariant CIFAR ResNet-18 of Yun et al., ECCV 2022
(width 8, ghost BN 64), B = 128, N = 1000 (7 full batches and a ragged one of 104 images), SGD momentum 0.9;
synthetic 32x32 images by default (``--data-root`` with a ``cifar10-jpeg`` folder for real images). Under
``compile=True`` full batches run a forward compiled with static shapes and the ragged batch runs eagerly
(``train.StaticStep``).

**Epoch-interleaved.** The eager and the compiled run of a pair are the real ``fit`` (or ``fit_many``) calls, each
in its own thread, taking turns epoch by epoch: a stand-in store hands the turn over at every epoch end
(``log_epoch``) and the other thread waits meanwhile, so only one trains at a time and consecutive epochs of the two
see the same load. On cores shared with other jobs this matters more than usual: OpenMP's spinning barriers make a
2-thread eager loop, whose many small operators each synchronize the threads, several times slower when the cores
are oversubscribed. Reported per pair:

* ``s_epoch``: median training seconds per epoch over epochs 2.. (``history[i]["seconds"]``, which excludes
  evaluation; x M for ``fit_many``, whose records hold the member's share); ``ratio_median`` (and quartiles): the
  median over epochs 2.. of eager / compiled seconds of the same epoch number (adjacent in time);
* ``cpu_ratio_median``: the same ratio of the process CPU seconds of each epoch (``time.process_time`` over the
  run's turn; evaluation, run only in the last epoch, included there): less sensitive to other jobs with
  ``--threads 1``; with 2 threads the spinning of a waiting OpenMP thread counts as CPU time too;
* ``compile_s``: the compiled run's first epoch minus its median epoch (inductor's on-disk cache is a fresh
  temporary folder, so this is a cold compile; ``--keep-cache`` uses the usual one);
* memory, measured after the pairs, each variant alone in a fresh process for 4 epochs: ``peak_rss_mib``, the
  process's peak resident set (Linux ``VmHWM`` of ``/proc/self/status``, interpreter and torch included), and
  ``rss_before_mib``, its resident set after importing torch and the package. The compiled process finds its
  graphs in inductor's cache: its first epoch minus the median of epochs 3-4 is ``cached_compile_s``, what every
  further run of the same shapes pays on a machine that has compiled them once (a new process: importing inductor,
  tracing the model, loading the kernels).

    .venv/bin/python benchmarks/bench_compile.py --threads 2 1        # writes benchmarks/results_cpu_compile.json
"""
from __future__ import annotations

import os
import sys
import tempfile

if "--keep-cache" not in sys.argv and "--child" not in sys.argv:
    # a cold compile: inductor's caches in a fresh folder (read at the first compilation; children inherit it)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_compile_inductor_")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from repro_lib.batched import fit_many  # noqa: E402
from repro_lib.config import RunConfig  # noqa: E402
from repro_lib.train import fit  # noqa: E402


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _status_mib(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return float(line.split()[1]) / 1024
    return float("nan")


class _Turns:
    """Whose turn it is among ``n`` threads; a finished thread is skipped."""

    def __init__(self, n: int):
        self.cond = threading.Condition()
        self.turn = 0
        self.done = [False] * n

    def wait(self, me: int) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.turn == me)

    def pass_on(self, me: int, finished: bool = False) -> None:
        with self.cond:
            self.done[me] |= finished
            n = len(self.done)
            nxt = [(me + k) % n for k in range(1, n + 1) if not self.done[(me + k) % n]]
            self.turn = nxt[0] if nxt else -1
            self.cond.notify_all()


class _TurnStore:
    """A stand-in ``Store`` (nothing stored or resumed) for one run of ``members`` configs: waits for its turn at
    the first call (``get``, before the run seeds the global RNG and builds its model), hands the turn on at every
    epoch end and when finished, and records the process CPU seconds of every turn (``cpu``)."""

    def __init__(self, turns: _Turns, me: int, members: int):
        self.turns, self.me, self.members = turns, me, members
        self.asked = self.logged = self.finished = 0
        self.cpu: list[float] = []
        self.t0 = 0.0

    def _take(self):
        self.turns.wait(self.me)
        self.t0 = time.process_time()

    def get(self, cfg):
        self.asked += 1
        if self.asked == 1:
            self._take()
        return None

    def load_checkpoint(self, cfg, map_location=None):
        return None

    def start(self, cfg):
        pass

    def log_epoch(self, cfg, rec):
        self.logged += 1
        if self.logged % self.members == 0:  # fit_many logs one record per member and epoch
            self.cpu.append(time.process_time() - self.t0)
            self.turns.pass_on(self.me)
            self._take()

    def save_checkpoint(self, cfg, state):
        pass

    def finish(self, cfg, result):
        self.finished += 1
        if self.finished == self.members:
            self.turns.pass_on(self.me, finished=True)


def _train(cfgs, store=None, data_root=None) -> list[dict]:
    if len(cfgs) == 1:
        return [fit(cfgs[0], store=store, data_root=data_root, progress=False)]
    return fit_many(cfgs, store=store, data_root=data_root, progress=False)


def _epochs(results: list[dict]) -> list[float]:
    return [h["seconds"] * h.get("group_size", 1) for h in results[0]["history"]]


def interleaved(cfgs: list[RunConfig], data_root) -> dict:
    """The eager and the compiled run of ``cfgs`` in two threads, taking turns epoch by epoch."""
    turns = _Turns(2)
    out: dict[str, list[dict]] = {}
    errors: list[BaseException] = []

    cpu: dict[str, list[float]] = {}

    def run(me: int, compiled: bool):
        store = _TurnStore(turns, me, len(cfgs))
        key = "compiled" if compiled else "eager"
        cpu[key] = store.cpu
        try:
            out[key] = _train([c.replace(compile=compiled) for c in cfgs], store, data_root)
        except BaseException as e:  # noqa: BLE001 -- reported below; the other thread must not wait for us
            errors.append(e)
            turns.pass_on(me, finished=True)

    threads = [threading.Thread(target=run, args=(0, False)), threading.Thread(target=run, args=(1, True))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    e, c = _epochs(out["eager"]), _epochs(out["compiled"])
    ratios = sorted(a / b for a, b in zip(e[1:], c[1:]))
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    warm_e, warm_c = statistics.median(e[1:]), statistics.median(c[1:])
    loss_rel = max(abs(a["train_loss"] - b["train_loss"]) / abs(a["train_loss"])
                   for a, b in zip(out["eager"], out["compiled"]))
    ce, cc = cpu["eager"][1:], cpu["compiled"][1:]  # CPU seconds of the epochs 2.. (the turns hold nothing else)
    cpu_ratio = statistics.median(a / b for a, b in zip(ce, cc)) if ce and cc else float("nan")
    return {"members": len(cfgs), "eager_epochs": e, "compiled_epochs": c, "eager_cpu_epochs": cpu["eager"],
            "compiled_cpu_epochs": cpu["compiled"], "cpu_ratio_median": cpu_ratio, "eager_s_epoch": warm_e,
            "compiled_s_epoch": warm_c, "ratio_median": statistics.median(ratios), "ratio_q1": q[0],
            "ratio_q3": q[2], "ratio_min": ratios[0], "ratio_max": ratios[-1], "compile_s": c[0] - warm_c,
            "eager_first_epoch_overhead_s": e[0] - warm_e,
            "break_even_epochs": (c[0] - warm_c) / (warm_e - warm_c) if warm_e > warm_c else float("inf"),
            "final_train_loss_max_rel_diff": loss_rel, "status": [r["status"] for r in out["compiled"]]}


def alone(what: str, compiled: bool, args) -> dict:
    """One run (4 epochs) by itself in a fresh process: its peak RSS, the RSS after importing and building nothing
    (the interpreter + torch), and its first-epoch overhead over epochs 3-4 (compiled: inductor's cache already
    holds the graphs)."""
    cmd = [sys.executable, __file__, "--child", what, "--threads", str(args.threads[0]), "--width", str(args.width),
           "--n", str(args.n), "--batch-size", str(args.batch_size), "--members", str(args.members), "--epochs", "4"]
    if compiled:
        cmd.append("--compiled")
    if args.data_root:
        cmd += ["--data-root", args.data_root]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ).stdout
    return json.loads(out.strip().splitlines()[-1])


def child(args, groups) -> None:
    rss0 = _status_mib("VmRSS")
    e = _epochs(_train([c.replace(compile=args.compiled) for c in groups[args.child]], None, args.data_root or None))
    print(json.dumps({"peak_rss_mib": _status_mib("VmHWM"), "rss_before_mib": rss0, "epochs": e,
                      "first_epoch_overhead_s": e[0] - statistics.median(e[2:] or e[1:])}))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[2],
                    help="torch threads (intra-op and inductor's kernels); several: one set of pairs each")
    ap.add_argument("--width", type=int, default=8)
    ap.add_argument("--n", type=int, default=1000, help="training images (1000: a ragged last batch of 104)")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=8, help="epochs per run (the first one compiles)")
    ap.add_argument("--members", type=int, default=3, help="fit_many group size (the seeds of one cell)")
    ap.add_argument("--data-root", default="", help="folder with cifar10-jpeg/ (empty: synthetic images)")
    ap.add_argument("--only", choices=["fit", "fit_many"], default=None)
    ap.add_argument("--no-memory", action="store_true", help="skip the one-at-a-time memory runs")
    ap.add_argument("--keep-cache", action="store_true", help="use inductor's usual cache (no cold compile)")
    ap.add_argument("--out", default=str(Path(__file__).with_name("results_cpu_compile.json")))
    ap.add_argument("--child", choices=["fit", "fit_many"], default=None, help=argparse.SUPPRESS)
    ap.add_argument("--compiled", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads[0])
    root = args.data_root or None
    base = RunConfig(model="resnet18", scale_invariant=True, width=args.width,
                     dataset="cifar10-jpeg" if root else "cifar10", synthetic=not root, n=args.n, n_test=200,
                     batch_size=args.batch_size, ghost_batch=64, lr=0.1, weight_decay=5e-4, momentum=0.9,
                     schedule="constant", num_epochs=args.epochs, eval_every=10 ** 6, checkpoint_every_s=1e9,
                     device="cpu", profile="cpu")
    groups = {"fit": [base], "fit_many": [base.replace(seed=s) for s in range(args.members)]}
    if args.child:
        return child(args, groups)
    meta = {"torch": torch.__version__, "cpu": cpu_model(), "machine": platform.machine(),
            "threads": args.threads, "cpus": os.cpu_count(), "load_start": os.getloadavg(),
            "width": args.width, "n": args.n, "batch_size": args.batch_size, "ghost_batch": 64,
            "epochs": args.epochs, "members": args.members, "data": "cifar10-jpeg" if root else "synthetic",
            "memory": "peak RSS (VmHWM) of a fresh process running the run alone for 4 epochs"}
    print(json.dumps(meta), flush=True)
    rows = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        # warm-up: the first run in a process pays for allocator / thread-pool start-up; not timed
        fit(base.replace(n=2 * args.batch_size, num_epochs=1), data_root=root, progress=False)
        for name, cfgs in groups.items():
            if args.only and name != args.only:
                continue
            torch._dynamo.reset()  # inductor's CPU kernels are generated for the thread count in force
            t0 = time.perf_counter()
            row = {"what": name, "threads": threads, **interleaved(cfgs, root), "load_after": os.getloadavg()}
            row["wall_s"] = time.perf_counter() - t0
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if not k.endswith("epochs")}), flush=True)
            for k in ("eager_epochs", "compiled_epochs", "eager_cpu_epochs", "compiled_cpu_epochs"):
                print(f"  {k:<20} {[round(t, 2) for t in row[k]]}", flush=True)
    torch.set_num_threads(args.threads[0])
    if not args.no_memory:
        for row in rows:
            if row["threads"] != args.threads[0]:
                continue
            row["eager_alone"] = alone(row["what"], False, args)
            row["compiled_alone"] = alone(row["what"], True, args)
            row["cached_compile_s"] = row["compiled_alone"]["first_epoch_overhead_s"]
    meta["load_end"] = os.getloadavg()
    Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"{'what':<9} {'M':>2} {'thr':>3} {'eager s/ep':>10} {'comp s/ep':>9} {'eager/comp (q1-q3)':>20} {'CPU-s':>6} "
          f"{'compile s':>9} "
          f"{'cached s':>8} {'RSS eager':>9} {'RSS comp':>8} {'loss rel':>8}")
    for r in rows:
        mem = (r["eager_alone"]["peak_rss_mib"], r["compiled_alone"]["peak_rss_mib"], r["cached_compile_s"]) \
            if "eager_alone" in r else (float("nan"),) * 3
        print(f"{r['what']:<9} {r['members']:>2} {r['threads']:>3} {r['eager_s_epoch']:>10.3f} {r['compiled_s_epoch']:>9.3f} "
              f"{r['ratio_median']:>6.2f}x ({r['ratio_q1']:.2f}-{r['ratio_q3']:.2f}) {r['cpu_ratio_median']:>5.2f}x "
              f"{r['compile_s']:>9.1f} "
              f"{mem[2]:>8.1f} {mem[0]:>9.0f} {mem[1]:>8.0f} {r['final_train_loss_max_rel_diff']:>8.1e}")
    print(f"load average start {meta['load_start']} end {meta['load_end']}; wrote {args.out}")


if __name__ == "__main__":
    main()
