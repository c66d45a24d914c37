"""``compile=True`` vs eager on CPU for ``train.fit`` and a 3-member ``batched.fit_many`` (the seeds of one cell).

Model and data as the ``cpu`` profile's Table 1 runs: the scale-invariant CIFAR ResNet-18 of Yun et al., ECCV 2022
(width 8, ghost BN 64), B = 128, N = 1000 (7 full batches and a ragged one of 104 images), SGD momentum 0.9;
synthetic 32x32 images by default (``--data-root`` with a ``cifar10-jpeg`` folder for real images). Under
``compile=True`` full batches run a forward compiled with static shapes and the ragged batch runs eagerly
(``train.StaticStep``).

**Epoch-interleaved.** The eager and the compiled run of a pair are the real ``fit`` (or ``fit_many``) calls, each
in the main thread of its own fresh process (as in a notebook or a sweep job), taking turns epoch by epoch: a
stand-in store hands the turn over at every epoch end (``log_epoch``) and waits for it to come back, so only one
process trains at a time and consecutive epochs of the two see the same load from other jobs. Each process first
trains one untimed warm-up epoch of a small run (allocator and thread-pool start-up). Reported per pair:

* ``eager_s_epoch`` / ``compiled_s_epoch``: median training seconds per epoch over epochs 2.. (``history[i]
  ["seconds"]``, which excludes evaluation; x M for ``fit_many``, whose records hold the member's share);
  ``ratio_median`` (quartiles, min, max): over epochs 2.., eager / compiled seconds of the same epoch number
  (adjacent in time); ``cpu_ratio_median``: the same for the process CPU seconds of each turn
  (``time.process_time``; evaluation, only in the last epoch, included there);
* ``compile_s``: the compiled run's first epoch minus its median epoch. Inductor's on-disk cache is a fresh
  temporary folder, so this is a cold compile (``--keep-cache`` uses the usual one);
* ``cached_compile_s``: after the pair, the compiled process runs 3 more epochs from ``torch._dynamo.reset()``,
  finding its graphs in inductor's cache: first epoch minus median epoch, what a further run of the same shapes pays
  in a process that has compiled them once (a new process also imports inductor, a few seconds more);
* ``peak_rss_mib``: each process's peak resident set during its interleaved run (Linux ``VmHWM`` of
  ``/proc/self/status``: interpreter, torch, data and the warm-up included; ``rss_before_mib``: after importing);
* per turn, the system seconds and minor page faults of each process (``getrusage``).

glibc's allocator is configured by ``GLIBC_TUNABLES`` (``MALLOC_TUNABLES`` below; ``--default-malloc`` leaves it
as it is). With glibc's defaults the main thread page-faults on most large allocations (20 convolutions of a
128x64x16x16 batch: ~100k minor faults and 40 % of the CPU time in the kernel; none with these settings, nor in a
second thread, whose arena keeps freed memory), and epoch times of a pair varied up to 20x on a virtual machine.

    .venv/bin/python benchmarks/bench_compile.py --threads 2 1        # writes benchmarks/results_cpu_compile.json
"""
from __future__ import annotations

import os
import sys
import tempfile

if "--keep-cache" not in sys.argv and "BENCH_COMPILE_CACHE_SET" not in os.environ:
    # a cold compile: inductor's caches in a fresh folder (read at the first compilation; the children inherit it)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_compile_inductor_")
    os.environ["BENCH_COMPILE_CACHE_SET"] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from repro_lib.batched import fit_many  # noqa: E402
from repro_lib.config import RunConfig  # noqa: E402
from repro_lib.runs.notebook import cpu_model  # noqa: E402
from repro_lib.train import fit  # noqa: E402


# glibc's main arena hands large freed blocks back to the kernel (munmap, heap trimming), so the next allocation of
# that size page-faults again; with many short-lived activation tensors an eager step in the main thread spends much
# of its time in the kernel (system time) on a virtual machine. These settings keep freed memory in the process.
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296"


def _status_mib(key: str) -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return float(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def configs(args, what: str) -> list[RunConfig]:
    base = RunConfig(model="resnet18", scale_invariant=True, width=args["width"],
                     dataset="cifar10-jpeg" if args["data_root"] else "cifar10", synthetic=not args["data_root"],
                     n=args["n"], n_test=200, batch_size=args["batch_size"], ghost_batch=64, lr=0.1,
                     weight_decay=5e-4, momentum=0.9, schedule="constant", num_epochs=args["epochs"],
                     eval_every=10 ** 6, checkpoint_every_s=1e9, device="cpu", profile="cpu")
    return [base] if what == "fit" else [base.replace(seed=s) for s in range(args["members"])]


def _train(cfgs, store=None, data_root=None) -> list[dict]:
    if len(cfgs) == 1:
        return [fit(cfgs[0], store=store, data_root=data_root, progress=False)]
    return fit_many(cfgs, store=store, data_root=data_root, progress=False)


def _epochs(results: list[dict]) -> list[float]:
    return [h["seconds"] * h.get("group_size", 1) for h in results[0]["history"]]


class _TurnStore:
    """A stand-in ``Store`` (nothing stored or resumed) for one run of ``members`` configs in a process that holds
    the turn: hands it to the other process at every epoch end and waits for it to come back (unless the other is
    done); records the process CPU seconds of every turn and its system seconds and minor page faults."""

    def __init__(self, me: int, sems, done, members: int):
        self.me, self.sems, self.done, self.members = me, sems, done, members
        self.logged = 0
        self.cpu: list[float] = []
        self.sys: list[float] = []
        self.faults: list[int] = []
        self._mark()

    def _mark(self):
        self.t0, self.r0 = time.process_time(), resource.getrusage(resource.RUSAGE_SELF)

    def pass_on(self):
        other = 1 - self.me
        if not self.done[other]:
            self.sems[other].release()
            self.sems[self.me].acquire()
        self._mark()

    def get(self, cfg):
        return None

    def load_checkpoint(self, cfg, map_location=None):
        return None

    def start(self, cfg):
        pass

    def log_epoch(self, cfg, rec):
        self.logged += 1
        if self.logged % self.members == 0:  # fit_many logs one record per member and epoch
            r = resource.getrusage(resource.RUSAGE_SELF)
            self.cpu.append(time.process_time() - self.t0)
            self.sys.append(r.ru_stime - self.r0.ru_stime)
            self.faults.append(r.ru_minflt - self.r0.ru_minflt)
            self.pass_on()

    def save_checkpoint(self, cfg, state):
        pass

    def finish(self, cfg, result):
        pass


def _member(me: int, what: str, compiled: bool, args: dict, sems, done, queue) -> None:
    """One side of a pair, in its own process: wait for the turn, warm up, train, report; then the cached run."""
    out = {"rss_before_mib": _status_mib("VmRSS")}
    try:
        torch.set_num_threads(args["threads"])
        cfgs = [c.replace(compile=compiled) for c in configs(args, what)]
        root = args["data_root"] or None
        sems[me].acquire()
        fit(cfgs[0].replace(compile=False, n=2 * cfgs[0].batch_size, num_epochs=1), data_root=root, progress=False)
        store = _TurnStore(me, sems, done, len(cfgs))
        res = _train(cfgs, store, root)
        out.update(epochs=_epochs(res), cpu=store.cpu, sys=store.sys, faults=store.faults,
                   peak_rss_mib=_status_mib("VmHWM"),
                   train_loss=[r["train_loss"] for r in res], status=[r["status"] for r in res])
    except BaseException as e:  # noqa: BLE001 -- reported by the parent
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        done[me] = True
        sems[1 - me].release()
    if compiled and "error" not in out:  # both runs are done by now or no longer wait for this one
        torch._dynamo.reset()
        e = _epochs(_train([c.replace(num_epochs=3) for c in cfgs], None, args["data_root"] or None))
        out["cached_epochs"] = e
        out["cached_compile_s"] = e[0] - statistics.median(e[1:])
    queue.put((me, out))


def interleaved(what: str, args: dict) -> dict:
    """The eager (process 0) and the compiled run (process 1) of ``what``, taking turns epoch by epoch."""
    ctx = mp.get_context("spawn")
    sems, done, queue = [ctx.Semaphore(0), ctx.Semaphore(0)], ctx.Array("b", [False, False]), ctx.Queue()
    procs = [ctx.Process(target=_member, args=(me, what, me == 1, args, sems, done, queue)) for me in (0, 1)]
    for p in procs:
        p.start()
    sems[0].release()
    got = dict(queue.get() for _ in procs)
    for p in procs:
        p.join()
    for me in (0, 1):
        if "error" in got[me]:
            raise RuntimeError(f"{what} {'compiled' if me else 'eager'}: {got[me]['error']}")
    e, c = got[0]["epochs"], got[1]["epochs"]
    ratios = sorted(a / b for a, b in zip(e[1:], c[1:]))
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    warm_e, warm_c = statistics.median(e[1:]), statistics.median(c[1:])
    cpu_ratio = statistics.median(a / b for a, b in zip(got[0]["cpu"][1:], got[1]["cpu"][1:]))
    loss_rel = max(abs(a - b) / abs(a) for a, b in zip(got[0]["train_loss"], got[1]["train_loss"]))
    return {"members": len(configs(args, what)), "eager_s_epoch": warm_e, "compiled_s_epoch": warm_c,
            "ratio_median": statistics.median(ratios), "ratio_q1": q[0], "ratio_q3": q[2], "ratio_min": ratios[0],
            "ratio_max": ratios[-1], "cpu_ratio_median": cpu_ratio, "compile_s": c[0] - warm_c,
            "cached_compile_s": got[1]["cached_compile_s"],
            "break_even_epochs": (c[0] - warm_c) / (warm_e - warm_c) if warm_e > warm_c else float("inf"),
            "eager_peak_rss_mib": got[0]["peak_rss_mib"], "compiled_peak_rss_mib": got[1]["peak_rss_mib"],
            "rss_before_mib": got[0]["rss_before_mib"], "final_train_loss_max_rel_diff": loss_rel,
            "status": got[1]["status"], "eager_epochs": e, "compiled_epochs": c, "eager_cpu_epochs": got[0]["cpu"],
            "compiled_cpu_epochs": got[1]["cpu"], "eager_sys_epochs": got[0]["sys"],
            "compiled_sys_epochs": got[1]["sys"], "eager_minor_faults": got[0]["faults"],
            "compiled_minor_faults": got[1]["faults"], "cached_epochs": got[1]["cached_epochs"]}


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
    ap.add_argument("--keep-cache", action="store_true", help="use inductor's usual cache (no cold compile)")
    ap.add_argument("--default-malloc", action="store_true",
                    help=f"leave glibc's malloc as configured (default: GLIBC_TUNABLES={MALLOC_TUNABLES})")
    ap.add_argument("--out", default=str(Path(__file__).with_name("results_cpu_compile.json")))
    args = ap.parse_args(argv)
    if not args.default_malloc:  # read by glibc when a process starts: applies to the spawned pair processes
        os.environ["GLIBC_TUNABLES"] = ":".join(filter(None, [os.environ.get("GLIBC_TUNABLES"), MALLOC_TUNABLES]))
    meta = {"torch": torch.__version__, "cpu": cpu_model(), "machine": platform.machine(), "threads": args.threads,
            "cpus": os.cpu_count(), "load_start": os.getloadavg(), "width": args.width, "n": args.n,
            "batch_size": args.batch_size, "ghost_batch": 64, "epochs": args.epochs, "members": args.members,
            "data": "cifar10-jpeg" if args.data_root else "synthetic",
            "memory": "peak RSS (VmHWM) of each process of a pair during its run",
            "glibc_tunables": os.environ.get("GLIBC_TUNABLES", "")}
    print(json.dumps(meta), flush=True)
    rows = []
    for threads in args.threads:
        for what in ("fit", "fit_many"):
            if args.only and what != args.only:
                continue
            t0 = time.perf_counter()
            kw = {**vars(args), "threads": threads}
            row = {"what": what, "threads": threads, **interleaved(what, kw), "load_after": os.getloadavg(),
                   "wall_s": time.perf_counter() - t0}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if not k.endswith("epochs")}), flush=True)
            for k in ("eager_epochs", "compiled_epochs", "eager_cpu_epochs", "compiled_cpu_epochs", "eager_sys_epochs",
                      "compiled_sys_epochs", "eager_minor_faults", "compiled_minor_faults", "cached_epochs"):
                print(f"  {k:<21} {[round(t, 2) for t in row[k]]}", flush=True)
    meta["load_end"] = os.getloadavg()
    Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"{'what':<9} {'M':>2} {'thr':>3} {'eager s/ep':>10} {'comp s/ep':>9} {'eager/comp (q1-q3)':>20} "
          f"{'CPU-s':>6} {'compile s':>9} {'cached s':>8} {'RSS eager':>9} {'RSS comp':>8} {'loss rel':>8}")
    for r in rows:
        print(f"{r['what']:<9} {r['members']:>2} {r['threads']:>3} {r['eager_s_epoch']:>10.3f} "
              f"{r['compiled_s_epoch']:>9.3f} {r['ratio_median']:>6.2f}x ({r['ratio_q1']:.2f}-{r['ratio_q3']:.2f}) "
              f"{r['cpu_ratio_median']:>5.2f}x {r['compile_s']:>9.1f} {r['cached_compile_s']:>8.1f} "
              f"{r['eager_peak_rss_mib']:>9.0f} {r['compiled_peak_rss_mib']:>8.0f} "
              f"{r['final_train_loss_max_rel_diff']:>8.1e}")
    print(f"load average start {meta['load_start']} end {meta['load_end']}; wrote {args.out}")


if __name__ == "__main__":
    main()
