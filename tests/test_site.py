"""The static website of the published notebooks (``repro_lib.runs.site``, ``make site``).

Built once per test module from ``reports/`` into a temporary folder. The structural tests need no browser: every
published notebook has a page, every link and image of every page resolves inside the site, every page is in the
navigation, the landing page's verdicts are the README's, each chapter counts its notebooks' verdicts from their
claims, the runner's cells are left out of the pages. The browser tests load the pages in headless Chromium through
Playwright's Python API (the system's browser; skipped, saying how to get one, where Chromium or Playwright is
missing): every page renders, the landing page's first screen shows the bottom line, a notebook page's first screen
shows no parameter cell, a figure spans the content's width, a wide table scrolls.
"""
from collections import Counter
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
            m = re.match(r"(?:[^\[]*)\[[^\]]+\]\((?:.*?/)?([\w-]+)/([\w-]+)\.ipynb\)", cells[col["notebook"]])
            assert m, cells[col["notebook"]]  # the (first) notebook of the row
            rows.append((cells[col["verdict"]], m.group(1), m.group(2)))
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
        rerun = soup.find(id=site_mod.slug(site_mod.RERUN_HEADING))  # the section that ends the page
        assert rerun is not None and rerun.find_next_sibling("section") is None, page.name
        text = rerun.get_text()
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
            link, nb_links = tds[v].find("a"), tds[n].find_all("a")
            assert link is not None, f"verdict without a link: {tds[v].get_text()}"
            target = (site / nb_links[0]["href"]).resolve()
            assert target.exists()
            if len(nb_links) == 1:  # the verdict links to the page of the notebook that computes it
                assert link["href"] == nb_links[0]["href"]
            else:  # several notebooks: to their chapter, which lists each one's verdicts
                chapter = next(p.paper for p in site_mod.pages(REPORTS) if p.docname == f"{target.parent.name}/"
                               f"{target.stem}")
                assert link["href"] == f"chapter-{site_mod.slug(chapter)}.html"
            got.append((tds[v].get_text(strip=True), target.parent.name, target.stem))
            texts.append(tuple(tds[head.index(c)].get_text(" ", strip=True) for c in ("claim", "ours")))
    assert texts == _readme_rows(publish.summary(REPORTS), claims=True)  # the claims as written ("TEXP--")
    assert got == _readme_rows(publish.summary(REPORTS))  # the table of the notebooks the site is built from
    assert got == expected, ("README.md's results table is not the published notebooks' (`python -m repro_lib "
                             "summary reports --readme README.md`)")


def test_chapters_follow_the_registry_and_the_theory_opens_the_book(site):
    index = _soup(site / "index.html")
    nav = [a["href"] for a in index.select("nav.bd-docs-nav a.reference")]
    glossary = (ROOT / "docs" / "glossary.md").is_file()
    assert nav[0] == "theory.html" and nav[-1] == ("glossary.html" if glossary else "claims.html")
    pages = site_mod.pages(REPORTS)
    order = list(registry.NOTEBOOKS)
    papers = list(dict.fromkeys(nb.paper for nb in registry.NOTEBOOKS.values()))
    ranks = [(papers.index(p.paper), not p.name.endswith("_summary"), order.index(p.name))
             for p in pages if p.name in order]
    assert ranks == sorted(ranks)
    theory = _soup(site / "theory.html").get_text(" ")
    assert "Lemma 1" in theory and "Theory: effective learning rate" in theory
    assert _soup(site / "theory.html").find("math") is not None  # equations as MathML
    assert "Best- and worst-tuned" not in theory  # only the theory cells of yun2022_section3


def test_every_built_page_is_in_the_navigation_and_the_book_has_a_favicon(site):
    index = _soup(site / "index.html")
    nav = {(site / a["href"]).resolve() for a in index.select("nav.bd-docs-nav a.reference")}
    built = {p.resolve() for p in site_mod.pages_of(site)  # the book's pages, not the tables its notebooks link to
             if 'class="bd-docs-nav' in p.read_text()} - {(site / "search.html").resolve()}  # the search box's
    assert built - nav == set(), f"pages built but not in the navigation: {sorted(built - nav)}"
    assert not (site / "genindex.html").exists()
    assert (site / "glossary.html").exists() == (ROOT / "docs" / "glossary.md").is_file()
    icon = index.find("link", rel="icon")
    assert icon is not None and (site / icon["href"]).is_file() and icon["href"].endswith(".svg")


def test_the_landing_page_opens_with_the_bottom_line(site):
    soup = _soup(site / "index.html")
    article = soup.select_one("article")
    first = article.find(["h2", "table"])  # the bottom line comes before the results
    box = article.select_one(".bottom-line")
    assert box is not None and box.find_next(["h2", "table"]) is first
    head, _ = site_mod.summary_parts(REPORTS)
    text = " ".join(box.get_text(" ").split())
    if head:  # the README's own bottom line (what `python -m repro_lib summary` writes), its links into the book
        head = site_mod.book_links(head, site_mod.pages(REPORTS), "glossary", set())
        words = re.findall(r"[A-Za-z]{4,}", re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", head))
        assert words and all(w in text for w in words), (head, text)
    else:  # the verdicts of every published claim counted
        claims = [c for p in site_mod.pages(REPORTS) if p.profile == "cpu" for c in site_mod.claims_of(p)]
        assert f"{len(claims)} claims" in text


def _words(claims: list[dict]) -> Counter:
    """The verdict words of ``claims`` counted as the results table counts them (``publish.group_word``)."""
    return Counter("not run" if publish.not_run(c) else c.get("word") or publish.verdict_word(c["verdict"])
                   for c in claims)


def test_each_chapter_counts_its_notebooks_verdicts_from_their_claims(site):
    for paper, pages in site_mod.chapters(site_mod.pages(REPORTS)).items():
        soup = _soup(site / f"chapter-{site_mod.slug(paper)}.html")
        sections = soup.select("article section section")
        links = [sec.find("h2").find("a")["href"] for sec in sections]
        assert links == [f"{p.docname}.html" for p in pages], paper  # every notebook, in reading order
        for page, sec in zip(pages, sections):
            claims = json.loads((page.source.parent / page.name / "claims.json").read_text())
            text = " ".join(sec.get_text(" ").split())
            counted = " · ".join(f"{w} {n}" for w, n in sorted(_words(claims).items(), key=lambda kv: (
                site_mod.WORD_ORDER.index(kv[0]) if kv[0] in site_mod.WORD_ORDER else 99, kv[0])))
            assert f"{len(claims)} claim{'s' if len(claims) != 1 else ''}: {counted}" in text, (page.docname, text)
            items = sec.select("li")
            assert 1 <= len(items) <= site_mod.CHAPTER_CLAIMS + 1
            assert claims[0]["claim"][:40] in " ".join(items[0].get_text(" ").split())


def test_the_pooled_answer_opens_the_yun_chapter(site):
    pages = site_mod.chapters(site_mod.pages(REPORTS))[registry.YUN]
    assert pages[0].name == "yun2022_summary"
    soup = _soup(site / f"chapter-{site_mod.slug(registry.YUN)}.html")
    assert soup.select_one("article section section h2 a")["href"] == "cpu/yun2022_summary.html"
    index = _soup(site / "index.html")
    nav = [a["href"] for a in index.select("nav.bd-docs-nav a.reference")]
    assert nav[nav.index(f"chapter-{site_mod.slug(registry.YUN)}.html") + 1] == "cpu/yun2022_summary.html"


def test_notebook_pages_leave_out_the_runners_cells_and_fold_the_set_up(site):
    for nb in published_notebooks(REPORTS):
        cells = json.loads(nb.read_text())["cells"]
        html = (site / nb.parent.name / f"{nb.stem}.html").read_text()
        for tag in ("parameters", "injected-parameters", "verdict"):  # myst-nb marks a cell with its tags
            assert not re.search(rf'tag_{tag}[ "]', html), f"{nb.stem}: a {tag} cell is shown"
        assert "# Parameters" not in html  # papermill's injected cell
        assert "result_first" not in html and "tag_remove-input" in html  # the result under the claim, no code
        setup = [c for c in cells if c["cell_type"] == "code" and "check_params(" in "".join(c["source"])]
        assert setup, f"{nb.stem}: no validation cell"
        folded = re.findall(r'<details class="[^"]*\bhide above-input">(.*?)</details>', html, re.S)
        assert any("check_params" in d for d in folded) or not setup[0].get("outputs"), nb.stem


def test_figures_take_the_content_width_and_link_to_their_full_size(site):
    soup = _soup(site / "cpu" / "yun2022_summary.html")
    images = soup.select("article .cell_output img")
    assert images
    for img in images:
        assert "width: 100%" in img.get("style", "")
        link = img.find_parent("a")
        assert link is not None and link["href"] == img["src"]


def test_book_tags_follow_one_rule():
    code = lambda src, tags=(), outputs=(): {"cell_type": "code", "source": src,  # noqa: E731
                                             "metadata": {"tags": list(tags)}, "outputs": list(outputs)}
    out = [{"output_type": "stream", "name": "stdout", "text": "54 runs"}]
    tags = site_mod.book_tags
    assert tags(code("profile: str = 'cpu'  # help", ["parameters"])) == ["remove-cell"]
    assert tags(code("# Parameters\nprofile = 'cpu'", ["injected-parameters"])) == ["remove-cell"]
    assert tags(code("print(verdict)", ["verdict"], out)) == ["remove-cell"]
    assert tags(code("from repro_lib.results import publish\n\npublish.result_first()  # the outcome")) == \
        ["remove-input"]
    setup = "import os\n\nfrom repro_lib.runs.notebook import check_params\n\ncheck_params(globals())\nplan()"
    assert tags(code(setup, outputs=out)) == ["hide-input"]
    assert tags(code(setup)) == ["remove-cell"]  # folded code that prints nothing: nothing to show
    assert tags(code("import math  # noqa: E402\nfrom pathlib import Path", outputs=out)) == ["hide-input"]
    assert tags(code("publish.record_claims(out_dir, claims)")) == ["remove-cell"]
    # content stays: code that computes, a markdown cell, a cell whose author chose already, IPython syntax
    assert tags(code("import torch\nnet = create('resnet18')", outputs=out)) == []
    assert tags({"cell_type": "markdown", "source": "## Protocol", "metadata": {}}) == []
    assert tags(code("x = 1", ["hide-output", "parameters"])) == []
    assert tags(code("%matplotlib inline\nimport os")) == []


def test_verdict_counts_count_every_word_in_order():
    claims = [{"word": "undecided", "verdict": "undecided: +0.1 [-1, +1]"},
              {"word": "not judged", "verdict": "not judged (the regime was not reached): +3 [+1, +5]"},
              {"word": "holds", "verdict": "holds: +2 [+1, +3]"},
              {"word": "not judged", "verdict": "not judged (…)"},
              {"verdict": "holds: max rel. error 1e-15"},  # a claim written before the word field
              {"verdict": "n/a (not run in this profile)"},
              {"word": "rejected", "verdict": "rejected"}]
    assert site_mod.verdict_counts(claims) == [("holds", 2), ("undecided", 1), ("not judged", 2), ("not run", 1),
                                               ("rejected", 1)]
    assert site_mod.counts_markdown([("not judged", 2)]) == "[not judged 2]{.verdict-not-judged}"
    grid = [dict(c, claim="the yellow cell is best") for c in claims[:3]]  # three columns of one claim
    lines = site_mod.bottom_line([*grid, dict(claims[2], claim="the optimum lies near", ours="×0.68 [0.52, 0.89]"),
                                  dict(claims[0], claim="a third claim")], limit=2)
    assert lines == ["the yellow cell is best — 3 columns: [holds 1]{.verdict-holds} · "
                     "[undecided 1]{.verdict-undecided} · [not judged 1]{.verdict-not-judged}",
                     "the optimum lies near — [holds]{.verdict-holds} (×0.68 \\[0.52, 0.89\\])",
                     "… and 1 more claim on its page"]


def test_summary_parts_split_the_bottom_line_from_the_tables(monkeypatch):
    table = "**`cpu` profile · CIFAR-10**\n\n| paper | what |\n|---|---|\n| a | b |"
    monkeypatch.setattr(site_mod.publish, "summary", lambda reports: f"**What we found.** Pooled ×0.68.\n\n{table}")
    assert site_mod.summary_parts("reports") == ("**What we found.** Pooled ×0.68.", table)
    monkeypatch.setattr(site_mod.publish, "summary", lambda reports: table)
    assert site_mod.summary_parts("reports") == ("", table)


def test_the_glossary_is_a_page_where_its_source_exists(tmp_path):
    reports = tmp_path / "reports"
    (reports / "cpu").mkdir(parents=True)
    source = REPORTS / "cpu" / "yun2022_table2.ipynb"
    nb = json.loads(source.read_text())
    link = "\nTerms: [tuning factor](../../docs/glossary.md#tf)."
    nb["cells"][0]["source"] = "".join(nb["cells"][0]["source"]) + link
    (reports / "cpu" / "yun2022_table2.ipynb").write_text(json.dumps(nb))
    shutil.copytree(REPORTS / "cpu" / "yun2022_table2", reports / "cpu" / "yun2022_table2")
    without = tmp_path / "without"
    site_mod.write_sources(reports, without)
    landing = (without / "index.md").read_text()
    assert not (without / "glossary.md").exists() and "glossary.md" not in landing and "\nglossary\n" not in landing
    page = (without / "cpu" / "yun2022_table2.ipynb").read_text()
    assert "Terms: tuning factor." in page and not re.search(r"\]\([^)]*glossary\.md", page)  # the links' text
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "glossary.md").write_text(
        "## Tuning factor {#tf}\nN·η·λ/(B(1−μ)), see [Table 2](../reports/cpu/yun2022_table2.ipynb), "
        "[the README](../README.md) and [the paper](https://example.org/); [above](#tf).\n")
    src = tmp_path / "src"
    site_mod.write_sources(reports, src)
    text = (src / "glossary.md").read_text()
    assert text.startswith("# Glossary\n")
    assert "[Table 2](cpu/yun2022_table2.ipynb)" in text and "[above](#tf)" in text
    assert "the README" in text and "README.md" not in text and "example.org" not in text
    assert "\nglossary\n" in (src / "index.md").read_text()  # in the table of contents
    assert "[tuning factor](../glossary.md#tf)" in (src / "cpu" / "yun2022_table2.ipynb").read_text()


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
    assert site_mod.verdict_class("holds 2 · undecided 16 · not judged 11") == "verdict-mixed"
    assert site_mod.verdict_class("not judged 3") == "verdict-not-judged"


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
    assert "`python -m repro_lib data cifar10-jpeg --root <folder>`" in site_mod.rerun_cell(page)["source"]


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
         "--disable-component-update", "--disable-sync", "--no-first-run"]


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


def _favicon_left(request) -> bool:
    """A page's favicon still loading when the test moves to the next page (its request aborted, not missing)."""
    return request.url.endswith("/_static/favicon.svg") and "ABORTED" in (request.failure or "")


def test_the_site_in_a_browser(site, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    problems = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: None if _favicon_left(r) else problems.append(f"request failed: {r.url}"))
    for html in site_mod.pages_of(site):
        page.goto(html.as_uri(), wait_until="load")
        state = page.evaluate("""() => ({
            images: [...document.images].map(i => [i.getAttribute('src'), i.complete && i.naturalWidth > 0]),
            links: [...document.querySelectorAll('a[href]')].map(a => a.href).filter(h => h.startsWith('file:')),
            cut: (() => {  // a table wider than the article scrolls inside it, never runs past its edge
                const article = document.querySelector('article.bd-article');
                if (!article) return [];
                const right = article.getBoundingClientRect().right + 1;
                return [...article.querySelectorAll('table')].filter(t => {
                    if (t.getBoundingClientRect().right <= right) return false;
                    for (let e = t.parentElement; e && e !== article; e = e.parentElement) {
                        const o = getComputedStyle(e).overflowX;
                        if ((o === 'auto' || o === 'scroll') && e.getBoundingClientRect().right <= right)
                            return false;
                    }
                    return true;
                }).map(t => t.innerText.slice(0, 80));
            })(),
        })""")
        broken = [src for src, ok in state["images"] if not ok]
        assert not broken, f"{html.name}: images that do not render: {broken}"
        assert not state["cut"], f"{html.name}: tables cut at the page's edge: {state['cut']}"
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


def _first_screen(page) -> dict:
    """What the first screen (the viewport, unscrolled) of the loaded page shows."""
    return page.evaluate("""() => {
        window.scrollTo(0, 0);
        const h = window.innerHeight;
        const shown = e => { const b = e.getBoundingClientRect(); const s = getComputedStyle(e);
                             return b.bottom > 0 && b.top < h && b.width > 0 && b.height > 0 &&
                                    s.visibility !== 'hidden' && s.display !== 'none'; };
        const box = document.querySelector('.bottom-line');
        return {
            bottom_line: box && shown(box) ? box.innerText : null,
            code: [...document.querySelectorAll('article .cell_input, article div.highlight')]
                      .filter(shown).map(e => e.innerText),
        };
    }""")


def test_a_readers_first_screens_in_a_browser(site, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    # the landing page: the bottom line on the first screen, above the results
    page.goto((site / "index.html").as_uri(), wait_until="load")
    first = _first_screen(page)
    assert first["bottom_line"] and re.search(r"\d", first["bottom_line"]), first
    top = page.evaluate("() => document.querySelector('.bottom-line').getBoundingClientRect().top")
    assert top < page.evaluate("() => document.querySelector('article table').getBoundingClientRect().top")

    # a notebook page: its first screen shows no parameter cell (nor any other code)
    pages = [p for p in site_mod.pages(REPORTS) if p.profile == "cpu"]
    for name in dict.fromkeys(["yun2022_summary", "yun2022_section3", pages[-1].name]):
        page.goto((site / "cpu" / f"{name}.html").as_uri(), wait_until="load")
        code = "\n".join(_first_screen(page)["code"])
        assert "profile: str" not in code and "# Parameters" not in code, f"{name}: {code[:300]}"
        assert page.locator(".tag_parameters, .tag_injected-parameters").count() == 0

    # a figure spans the content's width (at least 90 % of the article's width inside its padding), and links to
    # itself at full size
    drawn = [p.name for p in pages if '"image/png"' in p.source.read_text()]
    for name in dict.fromkeys(["yun2022_summary", drawn[0], drawn[-1]]):
        page.goto((site / "cpu" / f"{name}.html").as_uri(), wait_until="load")
        sizes = page.evaluate("""() => {
            const art = document.querySelector('article.bd-article'), s = getComputedStyle(art);
            const content = art.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
            const img = document.querySelector('article .cell_output img');
            return {content: content, figure: img.getBoundingClientRect().width,
                    link: img.closest('a') ? img.closest('a').getAttribute('href') : null,
                    src: img.getAttribute('src')};
        }""")
        assert sizes["figure"] >= 0.9 * sizes["content"], f"{name}: {sizes}"
        assert sizes["link"] == sizes["src"], f"{name}: {sizes}"

    page.close()
