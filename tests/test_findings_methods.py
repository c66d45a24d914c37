"""results.findings for the notebooks that are not swept paper grids: the computed lines of their "What we
found" cells."""
import math
from types import SimpleNamespace

import pandas as pd
import pytest

from repro_lib.results import findings as F


def test_paired_gaps():
    hist = pd.DataFrame([dict(label=lab, seed=0, epoch=e, train_acc=a + e, test_acc=a + 2 * e)
                         for lab, a in (("exact", 10.0), ("schedule only", 11.5)) for e in (1, 2, 3)])
    g = F.paired_gaps(hist, {"schedule only": "exact", "absent": "exact"})
    assert len(g) == 1
    r = g.iloc[0]
    assert r["max |Δ train_acc|"] == pytest.approx(1.5) and r["Δ final test_acc"] == pytest.approx(1.5)
    assert r["final test_acc (run)"] == pytest.approx(17.5)
    assert F.paired_gaps(hist.iloc[:0], {"a": "b"}).empty


def test_identity_verdict():
    assert F.identity_verdict({"a": 1e-15, "b": 3e-15}, tol=1e-9).startswith("holds: max rel. error 3.0e-15 (2 ")
    bad = F.identity_verdict({"a": 1e-15, "b": 1e-3, "c": float("nan")}, tol=1e-9)
    assert bad.startswith("fails:") and "2/3" in bad
    assert F.identity_verdict({"a": 1e-15, "b": 1e-3}, tol=1e-9).startswith("fails: b rel. error 1.0e-03")
    assert F.identity_verdict({}, tol=1.0).startswith("n/a")
    assert F.identity_verdict(pd.Series({"Thm 2.9": 2e-15}), tol=1e-9) == \
        "holds: max rel. error 2.0e-15 (1 identity, tolerance 1e-09)"


def test_binomial_sd_lead_and_perfect_at():
    assert F.binomial_sd(50.0, 2500) == pytest.approx(1.0)
    assert math.isnan(F.binomial_sd(float("nan"), 100)) and math.isnan(F.binomial_sd(50.0, 0))
    key, margin = F.lead(pd.Series({1e-4: 40.0, 4e-4: 43.0, 1.6e-3: float("nan"), 2e-3: 42.5}))
    assert key == 4e-4 and margin == pytest.approx(0.5)
    assert math.isnan(F.lead(pd.Series({1.0: 3.0}))[1]) and F.lead(pd.Series(dtype=float))[0] is None
    t = pd.DataFrame({"delta": [1.0, 0.1, 0.02], "a": [100.0, 100.0, 100.0], "b": [52.5, 90.0, 100.0],
                      "c": [10.0, 97.5, 90.0]})
    assert F.perfect_at(t, "a") == "at every δ"
    assert F.perfect_at(t, "b") == "at δ ∈ {0.02}"
    assert F.perfect_at(t, "c") == "at no δ (best 97.5 at δ = 0.1)"


def test_labels_and_minutes():
    assert F.dataset_label([SimpleNamespace(dataset="cifar10", synthetic=False),
                         SimpleNamespace(dataset="cifar10-jpeg", synthetic=False)]).startswith("CIFAR-10, CIFAR-10 JPEG")
    assert F.dataset_label([SimpleNamespace(dataset="synthetic-imagefolder")]) == "synthetic images (pipeline check)"
    assert F.dataset_label([SimpleNamespace(dataset="imagenet")]) == "ImageNet"
    assert F.dataset_label([SimpleNamespace(dataset="cifar10", synthetic=True)]) == "synthetic images (pipeline check)"
    assert F.train_minutes(pd.DataFrame({"seconds": [60.0, float("nan"), 120.0]})) == pytest.approx(3.0)
    assert F.train_minutes([{"train_seconds": 90.0}, {"status": "missing"}]) == pytest.approx(1.5)
    assert F.num(float("nan")) == "n/a" and F.num(1.234, "+.1f") == "+1.2" and F.num(None) == "n/a"
