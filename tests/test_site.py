"""The static website of the published notebooks (``repro_lib.runs.site``, ``make site``).

Built once per test module from ``reports/`` into a temporary folder. The structural tests need no browser: every
published notebook has a page, every link and image of every page resolves inside the site, and the landing page's
verdicts are the README's. The browser test loads every page in headless Chromium through Playwright's Python API
(the system's browser; skipped, saying how to get one, where Chromium or Playwright is missing).
"""
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from repro_lib.papers import registry
from repro_lib.results import publish
from repro_lib.results.executed import published_notebooks

site_mod = pytest.importorskip("repro_lib.runs.site")
pytest.importorskip("sphinx", reason="the site needs sphinx (requirements-nopins.txt)")
pytest.importorskip("myst_nb", reason="the site needs myst-nb (requirements-nopins.txt)")
bs4 = pytest.importorskip("bs4")

# Sphinx's own deprecation notices about the themes it loads (not about this package) left out
pytestmark = pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built from ``reports/``, once per test run: pytest-xdist workers share it (the first one builds it
    under a lock; the others wait for it) instead of each building its own."""
    import fcntl

    shared = tmp_path_factory.getbasetemp()
    shared = shared.parent if os.environ.get("PYTEST_XDIST_WORKER") else shared  # the run's folder, not the worker's
    out = shared / "site"
    with open(shared / "site.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / ".built").exists():
            index = site_mod.build(REPORTS, out, log=None)
            assert index == out / "index.html" and index.exists()
            (out / ".built").write_text("")
    return out


def _soup(path: Path):
    return bs4.BeautifulSoup(path.read_text(), "html.parser")


def _readme_rows(block: str | None = None, claims: bool = False) -> list[tuple[str, ...]]:
    """``(verdict, profile, notebook)`` of every row of the README's results table (or of ``block``, a results
    table as ``publish.summary`` writes it); ``claims``: ``(claim, ours)`` of every row instead."""
    block = publish.readme_results(ROOT / "README.md") if block is None else block
    col = {c: publish.SHORT_COLUMNS.index(c) for c in ("verdict", "notebook", "claim", "ours")}
    rows = []
    for line in block.splitlines():
        cells = site_mod.split_row(line) if line.startswith("| ") else []
        if len(cells) == len(publish.SHORT_COLUMNS) and cells[0] != "paper":
            if claims:
                rows.append(tuple(cells[col[c]].replace("\\|", "|") for c in ("claim", "ours")))
                continue
            m = re.fullmatch(r"\[([\w-]+)\]\((?:.*/)?([\w-]+)/([\w-]+)\.ipynb\)", cells[col["notebook"]])
            assert m, cells[col["notebook"]]
            rows.append((cells[col["verdict"]], m.group(2), m.group(3)))
    return rows


# ------------------------------------------------------------------------------------------ structure


def test_every_published_notebook_has_a_page_with_its_outputs_and_its_rerun_command(site):
    published = published_notebooks(REPORTS)
    assert len(published) >= 10
    for nb in published:
        page = site / nb.parent.name / f"{nb.stem}.html"
        assert page.exists(), f"no page for {nb}"
        soup = _soup(page)
        cells = json.loads(nb.read_text())["cells"]
        title = re.sub(r"[*`]", "", "".join(cells[0]["source"]).split("\n", 1)[0].lstrip("# "))
        words = lambda t: " ".join(t.split())  # noqa: E731
        h1 = words(soup.find("h1").get_text(" ", strip=True).rstrip("#"))
        twice = len([p for p in published if p.stem == nb.stem]) > 1  # a notebook published in several profiles
        assert h1 == words(title) + (f" ({nb.parent.name} profile)" if twice else "")
        pngs = sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
        figures = [img for img in soup.select("article img") if img["src"].startswith("../_images/")]
        assert len(figures) >= pngs, f"{page.name}: {len(figures)} figures for {pngs} in the notebook"
        text = soup.select_one("article .admonition").get_text()
        assert f"python -m repro_lib run --profile {nb.parent.name} {nb.stem}" in text
        assert f"make reproduce PROFILE={nb.parent.name} NOTEBOOKS={nb.stem}" in text


def test_every_link_and_image_resolves_inside_the_site(site):
    assert site_mod.check(site) == []
    pages = site_mod.pages_of(site)
    assert {"index.html", "theory.html", "claims.html", "search.html"} <= {p.name for p in pages}
    # the references of a notebook page are relative (nothing absolute, nothing from another host)
    refs = site_mod.page_refs(site / "cpu" / "yun2022_table1.html")
    assert refs and not [u for _, u in refs if u.startswith(("/", "http:", "https:", "//"))]


def test_the_landing_page_shows_the_readme_results_with_verdicts_linked_to_their_pages(site):
    expected = _readme_rows()
    assert expected, "no results table in README.md"
    soup = _soup(site / "index.html")
    got, texts = [], []
    for table in soup.select("article table"):
        head = [th.get_text(strip=True).replace("\u2019", "'") for th in table.select("thead th")]  # smart quote
        if head != list(publish.SHORT_COLUMNS):
            continue
        v, n = head.index("verdict"), head.index("notebook")
        for tr in table.select("tbody tr"):
            tds = tr.find_all("td")
            link, nb_link = tds[v].find("a"), tds[n].find("a")
            assert link is not None, f"verdict without a link: {tds[v].get_text()}"
            assert link["href"] == nb_link["href"]
            target = (site / link["href"]).resolve()
            assert target.exists()
            got.append((tds[v].get_text(strip=True), target.parent.name, target.stem))
            texts.append(tuple(tds[head.index(c)].get_text(" ", strip=True) for c in ("claim", "ours")))
    assert texts == _readme_rows(publish.summary(REPORTS), claims=True)  # the claims as written ("TEXP--")
    assert got == _readme_rows(publish.summary(REPORTS))  # the table of the notebooks the site is built from
    assert got == expected, ("README.md's results table is not the published notebooks' (`python -m repro_lib "
                             "summary reports --readme README.md`)")


def test_chapters_follow_the_registry_and_the_theory_opens_the_book(site):
    index = _soup(site / "index.html")
    nav = [a["href"] for a in index.select("nav.bd-docs-nav a.reference")]
    assert nav[0] == "theory.html" and nav[-1] == "claims.html"
    pages = site_mod.pages(REPORTS)
    order = list(registry.NOTEBOOKS)
    ranks = [(list(dict.fromkeys(nb.paper for nb in registry.NOTEBOOKS.values())).index(p.paper), order.index(p.name))
             for p in pages if p.name in order]
    assert ranks == sorted(ranks)
    theory = _soup(site / "theory.html").get_text(" ")
    assert "Lemma 1" in theory and "Theory: effective learning rate" in theory
    assert _soup(site / "theory.html").find("math") is not None  # equations as MathML
    assert "Best- and worst-tuned" not in theory  # only the theory cells of yun2022_section3


def test_search_index_holds_every_notebook_page(site):
    text = (site / "searchindex.js").read_text()
    for nb in published_notebooks(REPORTS):
        assert f'"{nb.parent.name}/{nb.stem}"' in text


# ------------------------------------------------------------------------------------------ pieces


def test_check_finds_broken_links_other_hosts_and_absolute_paths(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "index.html").write_text('<a href="a/b.html#x">ok</a><img src="missing.png">'
                                         '<a href="https://example.org/">out</a><a href="/abs.html">abs</a>'
                                         '<a href="#here">anchor</a><p id="here"></p><a href="mailto:x@y">m</a>')
    (tmp_path / "a" / "b.html").write_text('<p id="y"></p><a href="../index.html#nope">back</a>')
    bad = site_mod.check(tmp_path)
    assert any("missing.png" in b and "no such file" in b for b in bad)
    assert any("example.org" in b and "another host" in b for b in bad)
    assert any("/abs.html" in b and "absolute" in b for b in bad)
    assert any("a/b.html#x" in b and "no such anchor" in b for b in bad)
    assert any("index.html#nope" in b for b in bad)
    assert len(bad) == 5


def test_verdict_classes():
    assert site_mod.verdict_class("holds") == "verdict-holds"
    assert site_mod.verdict_class("not run") == "verdict-not-run"
    assert site_mod.verdict_class("holds 1 / undecided 3") == "verdict-mixed"


def test_split_row_keeps_escaped_pipes():
    assert site_mod.split_row(r"| a | \|cos(g, w)\| < δ | [x](y.ipynb) |") == ["a", r"\|cos(g, w)\| < δ",
                                                                             "[x](y.ipynb)"]


def test_rerun_commands_carry_the_published_parameters(tmp_path):
    nb = tmp_path / "cpu" / "yun2022_table2.ipynb"
    nb.parent.mkdir()
    nb.write_text(json.dumps({"cells": [], "metadata": {"papermill": {"parameters": {
        "profile": "cpu", "results_dir": "reports", "collect": True, "download": True, "dataset": "cifar10-jpeg"}}}}))
    page = site_mod.Page("yun2022_table2", "cpu", nb, registry.YUN, "Table 2")
    run, make, report = site_mod.rerun_commands(page)
    assert run == "python -m repro_lib run --profile cpu yun2022_table2 -p dataset cifar10-jpeg -p data_root <folder>"
    assert make == ('make reproduce PROFILE=cpu NOTEBOOKS=yun2022_table2 '
                    'ARGS="-p dataset cifar10-jpeg -p data_root <folder>"')
    assert report == "make report NOTEBOOKS=yun2022_table2"


def test_theory_needs_its_heading(tmp_path):
    nb = tmp_path / "x.ipynb"
    nb.write_text(json.dumps({"cells": [{"cell_type": "markdown", "metadata": {}, "source": "## Protocol"}],
                              "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    with pytest.raises(ValueError, match="Theory"):
        site_mod.theory_notebook(nb, "cpu/x.ipynb")


def test_mathml_converts_the_notebooks_notation():
    out = site_mod.mathml(r"\frac{N\eta\lambda}{B(1-\mu)} \|\mathbf{x}\|^2", "block")
    assert out.startswith("<math") and 'display="block"' in out and "<mfrac>" in out


def test_build_refuses_to_replace_a_folder_it_did_not_build(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="out: .* not a site"):
        site_mod.build(REPORTS, tmp_path, log=None)
    assert (tmp_path / "keep.txt").read_text() == "mine"


# ------------------------------------------------------------------------------------------ browser

#: the system's Chromium, in the order looked for (``REPRO_CHROMIUM`` names another executable)
CHROMIUM = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]


def _chromium() -> str | None:
    if os.environ.get("REPRO_CHROMIUM"):
        return os.environ["REPRO_CHROMIUM"]
    return next((path for name in CHROMIUM if (path := shutil.which(name))), None)


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright is not installed (pip install playwright; it drives the system's Chromium)")
    exe = _chromium()
    if exe is None:
        pytest.skip("no Chromium on this machine: install one (Debian/Ubuntu: apt-get install chromium) or set "
                    "REPRO_CHROMIUM to a Chromium executable")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=FLAGS)
        yield b
        b.close()


def test_the_site_in_a_browser(site, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    problems = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    for html in site_mod.pages_of(site):
        page.goto(html.as_uri(), wait_until="load")
        state = page.evaluate("""() => ({
            images: [...document.images].map(i => [i.getAttribute('src'), i.complete && i.naturalWidth > 0]),
            links: [...document.querySelectorAll('a[href]')].map(a => a.href).filter(h => h.startsWith('file:')),
        })""")
        broken = [src for src, ok in state["images"] if not ok]
        assert not broken, f"{html.name}: images that do not render: {broken}"
        for href in state["links"]:
            target = Path(re.sub(r"[?#].*$", "", href).removeprefix("file://"))
            assert target.exists(), f"{html.name}: link to {href} does not resolve"
        assert not problems, f"{html.relative_to(site)}: " + "; ".join(problems)

    # the landing page: the results table of the published notebooks, every row
    page.goto((site / "index.html").as_uri())
    rows = page.locator("article table tbody tr")
    assert rows.count() == len(_readme_rows(publish.summary(REPORTS))) > 0
    assert page.locator("article table").first.is_visible()
    page.screenshot(path=str(tmp_path / "landing.png"), full_page=True)
    assert (tmp_path / "landing.png").stat().st_size > 10_000

    # a figure renders on the first notebook page of every paper (the first with a figure)
    for paper, pages in site_mod.chapters(site_mod.pages(REPORTS)).items():
        drawn = [p for p in pages if '"image/png"' in p.source.read_text()]
        assert drawn, f"{paper}: no published notebook with a figure"
        first = drawn[0]
        page.goto((site / f"{first.docname}.html").as_uri())
        figure = page.locator("article .cell_output img").first
        figure.scroll_into_view_if_needed()
        box = figure.bounding_box()
        assert box and box["width"] > 100 and box["height"] > 50, f"{paper}: no figure on {first.docname}"
        assert page.evaluate("(img) => img.naturalWidth", figure.element_handle()) > 100

    # the search box finds a notebook page (Sphinx's index, loaded as a script: it works from disk)
    page.goto((site / "search.html").as_uri() + "?q=angular+update")
    page.wait_for_selector("#search-results li", timeout=20_000)
    assert page.locator("#search-results li").count() > 3
    assert not problems, "; ".join(problems)
