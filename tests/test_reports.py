"""Published results (``reports/``): the README's results table is generated from the committed store, every
published notebook's runs are in that store under the current code (a grid change or a RESULTS_VERSION bump
without a re-run fails here), and a published notebook re-renders from the store without training."""
import json
import re
import shutil
from pathlib import Path

import pytest

from repro_lib.results import publish
from repro_lib.runs import published

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports"


def test_readme_results_table_is_generated_from_the_committed_store(monkeypatch):
    monkeypatch.chdir(ROOT)  # links in the table are relative to the repository root
    assert publish.readme_results("README.md") == publish.readme_block("reports"), (
        "README results block is out of date: run `python -m repro_lib summary reports --readme README.md`")
    assert published.readme_current("README.md", "reports"), (
        "README cost table or reports/README.md is out of date: run `python -m repro_lib summary reports --readme "
        "README.md`")


def test_every_published_notebook_has_its_runs_in_the_store():
    stale = {nb: hashes for nb, hashes in published.stale_runs(REPORTS).items() if hashes}
    assert not stale, ("published notebooks whose current runs are not in reports/runs (re-run them or remove "
                       f"them): { {k: len(v) for k, v in stale.items()} }")


def test_published_records_carry_their_provenance():
    for p in sorted((REPORTS / "runs").glob("*.json")):
        if "." in p.name[:-len(".json")]:
            continue
        rec = json.loads(p.read_text())
        assert {"repro_lib", "torch", "device", "num_threads"} <= set(rec["env"]), p.name
        assert "results_version" in rec, p.name


def _published_file(p: Path) -> bool:
    """A file of ``reports/`` that is published (not one of the training's own files that .gitignore keeps out:
    checkpoints, a running run's record and epochs, records set aside as damaged)."""
    rel = p.relative_to(REPORTS).as_posix()
    return not (rel.startswith(("checkpoints/", "runs/corrupt/", "runs/."))
                or rel.endswith((".running.json", ".epochs.json")))


def test_reports_stay_small():
    """The notebooks, figures and tables stay under 20 MiB; the run store grows with its runs (every planned run is
    one record), so it is held per record: a record keeps its per-epoch history and no weights (about 31 KiB)."""
    files = [p for p in REPORTS.rglob("*") if p.is_file() and _published_file(p)]
    records = {p for p in files if p.parent == REPORTS / "runs" and p.suffix == ".json"}
    rest = sum(p.stat().st_size for p in files if p not in records)
    assert rest < 20 * 2**20, f"reports/ without its run records is {rest / 2**20:.1f} MiB"
    mean = sum(p.stat().st_size for p in records) / max(len(records), 1)
    assert mean < 64 * 2**10, f"a run record averages {mean / 2**10:.0f} KiB"
    largest = max(records, key=lambda p: p.stat().st_size, default=None)
    assert largest is None or largest.stat().st_size < 512 * 2**10, f"{largest.name} is over 512 KiB"


def _fake_reports(tmp_path):
    root = tmp_path / "reports"
    (root / "cpu" / "nb1").mkdir(parents=True)
    (root / "cpu" / "nb1.ipynb").write_text(json.dumps({"cells": [], "metadata": {}}))
    (root / "cpu" / "nb2.ipynb").write_text(json.dumps({"cells": [], "metadata": {}}))
    grid = {"paper": "Yun et al. 2022", "claim": "yellow best | second", "data": "CIFAR-10", "seeds": 3,
            "train_minutes": 12.4}
    publish.record_claims(root / "cpu" / "nb1", [
        {**grid, "item": "Table 1 (a), N = 1000", "verdict": "holds (best)", "word": "holds", "rank": "best",
         "ours": "41.2", "paper_value": "88.9 (best)", "ci": [0.4, 1.6], "resolution": 0.6, "estimate": 1.0},
        {**grid, "item": "Table 1 (a), N = 2000", "verdict": "undecided (within the noise)", "word": "undecided",
         "rank": "second", "ours": "40.0", "paper_value": "88.1 (best)", "ci": [-0.8, 0.4], "resolution": 0.6,
         "estimate": -0.2},
        {"paper": "Yun et al. 2022", "item": "Fig. 2, angular update", "claim": "cosine > step",
         "data": "CIFAR-10", "seeds": 3, "verdict": "holds", "word": "holds", "ours": "+2.00", "paper_value": "+1.00",
         "ci": [0.5, 3.5], "resolution": 1.5, "estimate": 2.0, "paper_effect": 1.0, "train_minutes": 3.0}])
    return root


def test_summary_one_row_per_section_and_the_full_table_one_row_per_claim(tmp_path):
    """The README's first screen: a bottom line counted from the claims, then one row per paper section (a
    notebook no section names gets its own), what we found as a deciding interval [lo, hi], the verdict words
    counted; reports/README.md: one row per claim with its reason, and a line for a notebook without claims."""
    root = _fake_reports(tmp_path)
    text = publish.summary(root)
    head, table = text.split("\n\n", 1)
    assert head.startswith("Of 3 published claims: *holds* 2, *no* 0, *undecided* 1 (the interval within the noise), "
                           "*not judged* 0")
    lines = table.splitlines()
    assert lines[0] == "| paper | section | claim | ours | verdict | notebook |"
    assert lines[2].startswith("| Yun et al. 2022 | nb1 | yellow best \\| second | +1.00 [+0.40, +1.60] (+2 more) | "
                               "holds 2 · undecided 1 | [nb1](")  # a claim decided first, its interval [lo, hi]
    full = publish.full_table(root).splitlines()
    assert "**`cpu` profile · CIFAR-10** (seeds per claim: 3)" in full
    rows = [x for x in full if x.startswith("| Yun")]
    assert len(rows) == 3 and "undecided (within the noise)" in rows[1]
    assert full[-1].startswith("Published without a claim to judge: [nb2](")


def test_a_failed_gate_reads_not_judged_everywhere(tmp_path):
    """A claim whose gate failed is *not judged* in claims.json, the first screen and the README's counts."""
    root = _fake_reports(tmp_path)
    claims = json.loads((root / "cpu" / "nb1" / "claims.json").read_text())
    claims[1].update(gate_ok=False, word="undecided", verdict="undecided (before Δθ settled): +1.0")
    publish.record_claims(root / "cpu" / "nb1", claims)
    again = json.loads((root / "cpu" / "nb1" / "claims.json").read_text())
    assert again[1]["word"] == "not judged"
    assert again[1]["verdict"].startswith("not judged (the regime the claim speaks of was not reached; before Δθ")
    assert "*not judged* 1" in publish.result_markdown(again)
    assert "*not judged* 1" in publish.bottom_line(root)


def test_summary_folds_columns_not_run_yet_and_shows_the_seed_range(tmp_path):
    root = tmp_path / "reports"
    (root / "paper" / "nb").mkdir(parents=True)
    (root / "paper" / "nb.ipynb").write_text(json.dumps({"cells": [], "metadata": {}}))
    claim = {"paper": "Yun et al. 2022", "claim": "yellow best", "data": "CIFAR-10", "peak_tf": ""}
    publish.record_claims(root / "paper" / "nb", [
        {**claim, "item": "Table 1 (a), N = 3125", "seeds": 0, "seeds_max": 3, "verdict": "best (provisional)",
         "train_minutes": 7.0},
        *({**claim, "item": f"Table 1 (a), N = {n}", "seeds": 0, "verdict": "n/a (21 runs missing)",
           "train_minutes": 0.0} for n in (6250, 12500, 25000)),
        {**claim, "item": "Table 1 (b), N = 3125", "seeds": 2, "verdict": "second", "train_minutes": 3.0}])
    rows = publish.summary_rows(root)
    assert [r["item"] for r in rows] == ["Table 1 (a), N = 3125", "Table 1 (a), N = 6250 … Table 1 (a), N = 25000 "
                                         "(3 columns)", "Table 1 (b), N = 3125"]
    assert rows[0]["seeds"] == "0–3" and rows[2]["seeds"] == "2"
    assert rows[1]["verdict"] == "not run yet (63 runs)" and rows[1]["train min"] == ""


def test_readme_block_round_trip(tmp_path):
    root = _fake_reports(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{publish.BEGIN}\nold\n{publish.END}\n\ntail\n")
    assert published.main([str(root), "--readme", str(readme), "--check"]) == 1
    assert published.main([str(root), "--readme", str(readme)]) == 0
    assert published.main([str(root), "--readme", str(readme), "--check"]) == 0
    assert readme.read_text().endswith("\n\ntail\n") and "[nb1](" in readme.read_text()


def test_claims_rows_are_checked(tmp_path):
    with pytest.raises(ValueError, match="lacks"):
        publish.record_claims(tmp_path, [{"paper": "x"}])


def test_a_published_notebook_rerenders_from_its_store_without_training(tmp_path):
    """Publish Table 1 in smoke (trains), then re-render it the way `make report` does (collect=True): the same
    runs, none missing, no record written or checkpoint made, the claims and the verdict are back."""
    from repro_lib.runs.notebook import find_notebooks, read_verdict, run_notebook

    reports = tmp_path / "reports"
    (nb,) = find_notebooks(["yun2022_table1"])
    run_notebook(nb, "smoke", {}, results_dir=reports, progress=False)
    runs = reports / "runs"
    before = {p.name: p.stat().st_mtime_ns for p in runs.glob("*.json")}
    assert before and published.stale_runs(reports) == {str(reports / "smoke" / "yun2022_table1.ipynb"): []}
    (reports / "smoke" / "yun2022_table1" / "claims.json").unlink()  # must come back from the store alone
    # a run the notebook shows as missing is not stale; a grid change (here: a bumped RESULTS_VERSION) is
    from repro_lib import config

    old = config.RESULTS_VERSION
    try:
        config.RESULTS_VERSION = old + 1
        stale = published.stale_runs(reports)[str(reports / "smoke" / "yun2022_table1.ipynb")]
        assert len(stale) == len(before)
    finally:
        config.RESULTS_VERSION = old
    outcomes = published.rerender(reports, log=lambda *a, **k: None)
    assert [o.status for o in outcomes] == ["ok"]
    assert {p.name: p.stat().st_mtime_ns for p in runs.glob("*.json")} == before  # nothing trained or rewritten
    assert not list((reports / "checkpoints").glob("*"))
    assert not (reports / "smoke" / "reproduce.jsonl").exists()  # a re-render is not logged as a run
    import pandas as pd

    csv = pd.read_csv(reports / "smoke" / "yun2022_table1" / "runs.csv")
    assert (csv.status == "finished").all() and len(csv) == len(before)
    assert publish.notebook_parameters(reports / "smoke" / "yun2022_table1.ipynb")["collect"] is True
    assert re.match(r"table1: (holds|no|undecided) ", read_verdict(reports / "smoke" / "yun2022_table1.ipynb"))
    # a record trained with another compile flag (not hashed, other rounding) than the plan asks for: stale
    import json

    odd, victim = sorted(runs.glob("*.json"))[:2]
    rec = json.loads(odd.read_text())
    rec["config"]["compile"] = not rec["config"]["compile"]
    odd.write_text(json.dumps(rec))
    assert published.stale_runs(reports)[str(reports / "smoke" / "yun2022_table1.ipynb")] == [odd.stem]
    rec["config"]["compile"] = not rec["config"]["compile"]
    odd.write_text(json.dumps(rec))
    victim.unlink()  # a run the notebook showed as finished has lost its record: stale
    assert published.stale_runs(reports)[str(reports / "smoke" / "yun2022_table1.ipynb")] == [victim.stem]
    rows = publish.summary_rows(reports)
    assert rows and all(r["profile"] == "smoke" and r["data"] == "synthetic images (pipeline check)" for r in rows)


# ---------------------------------------------------------------------------------------- portable notebooks
#: an absolute path of some machine: a folder name after "/" (or a drive letter), then at least one more segment
_ABS_PATH = re.compile(r"(?<![\w.:/])(?:/(?:home|root|tmp|work|Users|mnt|opt|srv|data|var|scratch)/|[A-Z]:\\\\)[\w.-]+")
#: "README: <section>" / "README.md#anchor" (and DEVELOPERS.md) pointers in a notebook's text
_POINTER = re.compile(r"\b(README|DEVELOPERS)(?:\.md)?(?::\s+([A-Z][\w ,/-]+?)(?=[)\].;,]|$)|#([\w-]+))")


def _strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, list):
        for x in obj:
            yield from _strings(x)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if k not in ("image/png", "image/jpeg"):
                yield from _strings(v)


def _sections(doc: Path) -> tuple[set, set]:
    """(headings, GitHub anchors) of a Markdown file."""
    heads = {m.group(1).strip() for m in re.finditer(r"^#+\s+(.+)$", doc.read_text(), flags=re.M)}
    anchors = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}
    return heads, anchors


@pytest.mark.parametrize("executed", sorted(p.relative_to(REPORTS).as_posix() for p in REPORTS.glob("*/*.ipynb")))
def test_published_notebooks_name_no_machine_path_and_no_missing_section(executed):
    text = list(_strings(json.loads((REPORTS / executed).read_text())))
    paths = sorted({m.group(0) for s in text for m in _ABS_PATH.finditer(s)})
    assert not paths, f"{executed} names folders of the machine that ran it: {paths[:5]}"
    docs = {name: _sections(ROOT / f"{name}.md") for name in ("README", "DEVELOPERS")}
    for s in text:
        for m in _POINTER.finditer(s):
            heads, anchors = docs[m.group(1)]
            if m.group(2):
                assert any(h.startswith(m.group(2).strip()) for h in heads), f"{executed}: {m.group(0)!r}"
            else:
                assert m.group(3) in anchors, f"{executed}: {m.group(0)!r}"


def test_the_portability_scan_finds_what_it_looks_for():
    assert _ABS_PATH.search('results_dir = "/work/main/reports"')
    assert _ABS_PATH.search("data_root = '/home/me/data'")
    assert not _ABS_PATH.search("LR /10 at 150, N/B = 24, η/‖x‖², https://host/work/x")
    assert [m.group(2) for m in _POINTER.finditer("(measured H200 rates, README: Throughput)")] == ["Throughput"]
    assert [m.group(3) for m in _POINTER.finditer("see DEVELOPERS.md#run-store")] == ["run-store"]
    heads, anchors = _sections(ROOT / "DEVELOPERS.md")
    assert "run-store" in anchors and "Run store" in heads


def test_the_result_under_the_claim_is_computed_from_the_claims():
    """``publish.result_markdown``: the verdict words counted with links to the glossary and the audit, one table
    row per claim with a run (claim, ours, the paper's, the verdict word, the deciding interval), the columns
    ours/paper only where the claims carry them, a count of the claims without runs; the rules and what would decide
    a claim are in ``publish.audit_markdown``."""
    yun = [{"paper": "Y", "item": "Table 1 (a), N = 500", "claim": "yellow best", "data": "stand-in", "seeds": 3,
            "verdict": "undecided (shown above 1 of the 4 other cells (3 needed)): second", "word": "undecided",
            "ours": "yellow 37.86 ± 1.22", "paper_value": "yellow 88.93 (second)", "rank": "second",
            "estimate": 0.5, "ci": [-2.24, 3.23], "rule": {"relation": "best or second", "test": "pooled t",
                                                           "alpha": 0.025, "level": 0.95, "gate": "Δθ settled",
                                                           "declared": "after", "previous": "the rank alone"},
            "gate_ok": True, "regime": "settled (Δθ drift 3 %)", "to_decide": "about 9 seeds",
            "contrasts": {"0.039": [-2.24, 3.23]}, "previous_word": "holds", "train_minutes": 12.0},
           {"paper": "Y", "item": "Table 1 (a), N = 6250", "claim": "yellow best", "data": "stand-in", "seeds": 0,
            "verdict": "n/a (21 runs missing)", "train_minutes": 0.0}]
    text = publish.result_markdown(yun, caveat="**Conditions:** N = 500.", rerun="**Re-run:** `x`.")
    first = text.splitlines()[0]
    assert first.startswith("**Result** (stand-in;") and "*undecided* 1" in first
    assert f"]({publish.GLOSSARY})" in first and "](#audit)" in first
    assert "| claim | ours | paper | verdict | deciding interval |" in text
    assert ("| Table 1 (a), N = 500: yellow best | yellow 37.86 ± 1.22 | yellow 88.93 (second) | undecided | "
            "yellow − second other +0.50 [-2.24, +3.23] |") in text
    assert "1 more claim(s) without any run yet" in text and text.endswith("**Re-run:** `x`.")
    assert "about 9 seeds" not in text and "rank alone" not in text  # the audit's, not the story's
    audit = publish.audit_markdown(yun[:1])
    for part in ("*Rule:* best or second", "α = 0.025", "set after the records", "it replaced: the rank alone",
                 "verdict under that rule: *holds*", "measured: settled (Δθ drift 3 %) (passed)",
                 "0.039: [-2.24, +3.23]", "*What would decide it:* about 9 seeds"):
        assert part in audit, part
    toy = [{"paper": "L", "item": "Sec. 3", "claim": "a | b", "data": "toy", "seeds": 1, "verdict": "holds"}]
    assert "| claim | verdict | deciding interval |" in publish.result_markdown(toy)
    assert "a \\| b" in publish.result_markdown(toy)
    assert "No claim has a run behind it yet." in publish.result_markdown(yun[1:])
    note = "Table 3: across its B columns 16, 64 (×4) the best cell's tuning factor stays put (0.0781 → 0.0781)."
    two = [{**yun[0], "note": note}, {**yun[0], "item": "Table 1 (a), N = 1000", "note": note}]
    assert publish.result_markdown(two).count(note) == 1
    assert "*Claim, in every row:* yellow best." in publish.result_markdown(two)


def test_every_notebook_that_records_claims_shows_its_result_under_the_claim():
    """The cell right after the claim shows the result (``publish.result_first``), and the executed notebook's
    result replaced the placeholder with the table of its claims."""
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        if not any("record_claims" in "".join(c["source"]) or "yun.findings" in "".join(c["source"]) for c in cells):
            continue
        assert cells[0]["cell_type"] == "markdown" and "publish.result_first()" in "".join(cells[1]["source"]), nb
    for executed in sorted(REPORTS.glob("*/*.ipynb")):
        cells = json.loads(executed.read_text())["cells"]
        if "publish.result_first()" in "".join(cells[1]["source"]):
            shown = "".join(cells[1]["outputs"][0]["data"]["text/markdown"])
            assert shown.startswith("**Result**") and publish.RESULT_PENDING not in shown, executed


@pytest.mark.parametrize("claims", sorted(p.relative_to(REPORTS).as_posix() for p in REPORTS.glob("*/*/claims.json")))
def test_every_published_verdict_is_holds_no_or_undecided(claims):
    """A published verdict starts with one of the three words (``findings.VERDICTS``); an undecided one says why."""
    rows = json.loads((REPORTS / claims).read_text())
    for r in rows:
        word = publish.verdict_word(r["verdict"])
        assert word, f"{claims}: {r['item']}: {r['verdict']!r}"
        if word == "undecided":
            assert r["verdict"].startswith("undecided ("), f"{claims}: {r['item']}: no reason: {r['verdict']!r}"


def _real_claims():
    for path in sorted(REPORTS.glob("*/*/claims.json")):
        for c in json.loads(path.read_text()):
            if not str(c.get("data", "")).startswith(("exact arithmetic", "synthetic")):
                yield path.parent.name, c


def test_every_real_data_claim_states_its_interval_and_resolution():
    """Every claim measured on real images carries ``ci`` ([lo, hi] of the tested difference; null bounds only where
    no interval exists yet: too few seeds or runs) and ``resolution``; an "≈" claim also its ``margin``."""
    seen = 0
    for name, c in _real_claims():
        seen += 1
        assert "ci" in c and "resolution" in c, (name, c["item"])
        lo, hi = c["ci"]
        if lo is None:
            assert c["verdict"].startswith(("undecided", "not judged")) or publish.not_run(c), (name, c["item"],
                                                                                                  c["verdict"])
        else:
            assert lo <= hi and c["resolution"] == pytest.approx((hi - lo) / 2), (name, c["item"])
        if "≈" in c["claim"]:
            assert c.get("margin"), (name, c["item"])
    assert seen > 20


def test_no_published_verdict_contradicts_its_interval():
    """*no* never has 0 inside its interval, "within the noise" never has 0 outside it, and a grid claim's *no*
    rests on an interval below 0 (``ci`` is yellow − best other; below 0 whenever yellow − second is)."""
    for name, c in _real_claims():
        lo, hi = c.get("ci", [None, None])
        if lo is None:
            continue
        word = c.get("word") or publish.verdict_word(c["verdict"])
        if word == "no" and "≈" not in c["claim"] and "≳" not in c["claim"]:
            assert not (lo <= 0 <= hi), (name, c["item"], c["verdict"], c["ci"])
        if "within the noise" in c["verdict"]:
            assert lo <= 0 <= hi, (name, c["item"], c["verdict"], c["ci"])
