"""The first screen of a published notebook, beside its result table: what the table's terms mean, under what
conditions the runs reached their verdicts, and how to run them again. No training here.

* :data:`GLOSSARY` and :func:`glossary`: the terms a result table may use ("yellow", "tuning factor", "Δθ", "±",
  "[a, b]", the optimizers' short names, …), each with a pattern that finds it and a one-line definition; every one
  is defined once in ``docs/glossary.md``, which the first screen links (``tests/test_rendered.py`` checks it);
  :func:`glossary` writes the definitions of the terms a text uses, where a text needs them inline.
* :func:`conditions`: the caveat line, generated from the runs' configs -- N, width, epochs, test images, our
  accuracy beside the paper's, and whether the runs reached the regime the claim speaks of.
* :func:`rerun`: the re-run line -- the exact command, and the training minutes its records measured (the sum of
  their ``train_seconds``, on the device and threads the records name), an estimate only where nothing has run.

``results.publish.result_markdown`` puts the conditions and re-run lines on the first screen, under the claim's
table.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd

#: term -> (regular expression that finds it in a result table, its definition). Order: the order a glossary
#: line lists them.
GLOSSARY: dict[str, tuple[str, str]] = {
    "tuning factor": (r"tuning factor|\bTF\b",
                      "N·η·λ/(B(1−μ)), Yun et al. Eq. 27 (N images, LR η, weight decay λ, batch B, momentum μ)"),
    "yellow": (r"\byellow\b", "the cell at the paper's optimal tuning factor"),
    "Δθ": (r"Δθ", "the angle the scale-invariant weights turn per epoch (Eq. 11)"),
    "settled": (r"\bsettled\b|\bregime\b",
                "in the regime the claim speaks of: Δθ (Yun et al.) or ‖w‖²/η̃ (Li & Arora) steady before the first "
                "LR decay"),
    "±": (r"±", "after a mean, the sd over seeds; after a difference or margin, a half-width"),
    "[a, b]": (r"\[[-+−]?\d",
               "the interval of a difference over seeds (95 % unless it says 90 %)"),
    "resolution": (r"\bresolution\b|\bresolve",
                   "the interval's half-width: the smallest difference these seeds can tell from zero"),
    "margin": (r"\bmargin\b", "the largest difference read as \"the same\" in a ≈ claim"),
    "holds / no / undecided / not judged": (r"\bholds\b|\bundecided\b|\bnot judged\b",
                                            "the interval on the claimed side / the other side / within the noise "
                                            "/ the regime the claim speaks of not reached (docs/glossary.md)"),
    "SGDP, AdamP": (r"\bSGDP\b|\bAdamP\b",
                    "SGD / AdamW with the radial part of each step projected out (Heo et al.)"),
    "WD": (r"\bWD\b", "weight decay"),
    "SA-SGD": (r"SA-SGD|scale-amended",
               "scale-amended SGD: SGD whose step per layer is scaled by the back-matching rate (Zhang et al., "
               "supplement Eq. (*))"),
    "LARS": (r"\bLARS\b", "layer-wise adaptive rate scaling (You et al. 2017): a layer's step × ‖W‖/‖∇W‖"),
    "LSALR": (r"\bLSALR\b", "layer-specific adaptive learning rate (Singh et al. 2015): a layer's step × "
                            "(1 + log(1 + 1/‖∇W‖))"),
    "TEXP": (r"\bTEXP\b|TEXP--|TEXP−−",
             "tapered exponential LR schedule without weight decay (Li & Arora Thm 2.12), equivalent to step decay "
             "+ WD; TEXP−− lacks its LR decay at the phase starts"),
    "exp-cosine": (r"exp-cosine", "the exponential schedule equivalent to cosine LR + WD (Li & Arora Sec. 4)"),
    "‖w‖": (r"‖w‖", "the norm of the scale-invariant weights"),
    "norm growth": (r"norm growth", "the change of ‖w‖ from the first epoch to the last"),
}


def terms_used(text: str) -> list[str]:
    """The :data:`GLOSSARY` terms ``text`` uses, in the glossary's order."""
    return [t for t, (pattern, _) in GLOSSARY.items() if re.search(pattern, text)]


def glossary(text: str) -> str:
    """One line defining every :data:`GLOSSARY` term ``text`` uses ("" when it uses none)."""
    used = terms_used(text)
    if not used:
        return ""
    return "*Terms:* " + "; ".join(f"**{t}**: {GLOSSARY[t][1]}" for t in used) + "."


def _span(values, fmt=",.0f") -> str:
    vals = sorted({v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))})
    if not vals:
        return "?"
    lo, hi = vals[0], vals[-1]
    return format(lo, fmt) if lo == hi else f"{format(lo, fmt)}–{format(hi, fmt)}"


def n_test_images(cfg) -> int:
    """How many test images a run of ``cfg`` is scored on (``n_test`` or an ImageFolder run's ``n_val``; 0 = the
    dataset's whole test set)."""
    from ..data import DATASETS

    n_test = int(getattr(cfg, "n_test", 0) or getattr(cfg, "n_val", 0) or 0)
    if n_test:
        return n_test
    info = DATASETS.get(getattr(cfg, "dataset", ""))
    return info.n_test if info is not None else 0


def _cfgs(runs) -> list:
    if runs is None:
        return []
    if isinstance(runs, pd.DataFrame):
        return list(runs["cfg"]) if "cfg" in runs else []
    return list(runs)


def conditions(runs, paper=None, accuracy=None, paper_accuracy=None, regime: str = "", what: str = "") -> str:
    """The caveat line: under what conditions these runs reached their verdicts.

    ``runs``: the runs' configs (a sweep result with a ``cfg`` column, or configs); ``paper``: the paper's
    protocol as configs or a dict with any of ``n``, ``width``, ``num_epochs`` (printed beside ours); ``accuracy``
    and ``paper_accuracy``: the final test accuracies (%) to compare (values: their range is printed; text: as
    is); ``regime``: whether the runs reached the regime the claim speaks of, in words (without runs, e.g. for exact
    identities and toys, the whole line); ``what``: what the accuracy is of ("the yellow cells")."""
    cfgs = _cfgs(runs)
    if not cfgs:  # nothing trained on images (exact identities, toys): the regime in words, if any
        return f"**Conditions:** {regime}." if regime else ""
    pcfgs = _cfgs(paper) if not isinstance(paper, dict) else []
    pdict = paper if isinstance(paper, dict) else {}

    def span(values, field):
        if field == "n" and 0 in values:  # an ImageFolder run's n = 0: every training image
            rest = [v for v in values if v]
            return (_span(rest) + " and all" if rest else "all")
        return _span(values)

    def paper_span(field):
        if field in pdict:
            v = pdict[field]
            return span(list(v) if isinstance(v, (list, tuple, set)) else [v], field)
        return span([getattr(c, field, None) for c in pcfgs], field) if pcfgs else ""

    def part(field, words):
        values = [getattr(c, field, None) for c in cfgs]
        if all(v is None for v in values):  # a config kind without the field (ImageFolderConfig: no width)
            return ""
        ours = span(values, field)
        theirs = paper_span(field)
        return words(ours) + (f" (paper {theirs})" if theirs and theirs != "?" and theirs != ours else "")

    bits = [part("n", lambda s: f"N = {s} training images"), part("width", lambda s: f"width {s}"),
            part("num_epochs", lambda s: f"{s} epochs"),
            f"scored on {_span([n_test_images(c) for c in cfgs])} test images"]
    bits = [b for b in bits if b]
    acc = _range_text(accuracy)
    if acc:
        pacc = _range_text(paper_accuracy)
        bits.append(f"{what + ' ' if what else ''}accuracy {acc} % here" + (f", {pacc} % in the paper" if pacc
                                                                              else ""))
    if regime:
        bits.append(regime)
    return "**Conditions:** " + "; ".join(bits) + "."


def _range_text(values) -> str:
    if values is None:
        return ""
    if isinstance(values, str):
        return values
    vals = [float(v) for v in (values if hasattr(values, "__iter__") else [values])]
    vals = [v for v in vals if math.isfinite(v)]
    return _span(vals, ".1f") if vals else ""


#: parameters a re-run command leaves out: where things are, and defaults that name no choice
_NOT_IN_COMMAND = ("profile", "results_dir", "data_root", "collect", "download", "device")


def command(notebook: str, profile: str, params: dict | None = None) -> str:
    """The command that runs ``notebook`` again as published: ``python -m repro_lib run --profile P NAME`` with a
    ``-p NAME VALUE`` for each of ``params`` that is set (a non-empty, non-zero, non-False value; the folders,
    ``collect`` and ``device`` left out)."""
    ps = []
    for k, v in (params or {}).items():
        if k in _NOT_IN_COMMAND or v in ("", None, False) or (isinstance(v, (int, float)) and not isinstance(
                v, bool) and v == 0):
            continue
        ps.append(f" -p {k} {v}")
    return f"python -m repro_lib run --profile {profile} {notebook}{''.join(ps)}"


def measured(runs, store_dir=None) -> tuple[float, int, str]:
    """(training minutes, runs, where) of the runs that finished or diverged in a sweep result ``runs`` (its
    ``seconds``: the records' ``train_seconds``; a run two rows share counts once); ``where``: the device and
    threads their records name (``store_dir/runs/<hash>.json``'s ``env``), e.g. "2 CPU threads", "" if unknown."""
    if not isinstance(runs, pd.DataFrame) or "seconds" not in runs:
        return 0.0, 0, ""
    done = runs[runs["status"].isin(["finished", "diverged"])] if "status" in runs else runs
    if "hash" in done:
        done = done.drop_duplicates("hash")
    seconds = pd.to_numeric(done["seconds"], errors="coerce")
    minutes = float(seconds.sum()) / 60
    threads, devices = set(), set()
    if store_dir is not None and "hash" in done:
        for h in done["hash"]:
            p = Path(store_dir) / "runs" / f"{h}.json"
            try:
                env = json.loads(p.read_text()).get("env") or {}
            except (OSError, ValueError):
                continue
            if env.get("device") == "cpu" and env.get("num_threads"):
                threads.add(int(env["num_threads"]))
            elif env.get("device"):
                devices.add(str(env["device"]))
    where = sorted(devices)
    if threads:
        lo, hi = min(threads), max(threads)
        where.append(f"{lo}{f'–{hi}' if hi != lo else ''} CPU thread{'s' if hi > 1 else ''}")
    return minutes, int(seconds.notna().sum()), ", ".join(where)


def rerun(notebook: str, profile: str, params: dict | None = None, runs=None, store_dir=None,
          estimate_minutes: float | None = None, minutes: float | None = None, note: str = "") -> str:
    """The re-run line: :func:`command`, then the measured training minutes of ``runs`` (:func:`measured`) or,
    given, ``minutes`` (a notebook that trains outside a sweep); where nothing has run, ``estimate_minutes`` (the
    cost model's, said to be an estimate); ``note`` for a notebook that trains nothing ("seconds: exact
    arithmetic")."""
    from ..data_build import build_command

    data = build_command((params or {}).get("dataset"))  # how to get the data, where the package builds it
    line = f"**Re-run:** `{command(notebook, profile, params)}`" + (f" (its data: `{data}`)" if data else "")
    took, n, where = measured(runs, store_dir)
    if minutes is not None and math.isfinite(minutes) and minutes > 0:
        took, n = float(minutes), n or 0
    if took > 0:
        runs_text = f", {n} runs" if n else ""
        return line + f" — {took:,.0f} min of training measured{f' on {where}' if where else ''}{runs_text}" + (
            f"; {note}" if note else "") + "."
    if estimate_minutes is not None and math.isfinite(estimate_minutes):
        return line + f" — nothing has run yet: about {estimate_minutes:,.0f} min of training on 2 CPU threads " \
                      "(an estimate from measured rates)" + (f"; {note}" if note else "") + "."
    return line + (f" — {note}." if note else ".")
