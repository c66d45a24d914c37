"""The published notebooks as one static website, read like a book (``make site``, ``python -m repro_lib site``).

Built from the executed notebooks in ``reports/<profile>/`` as they are: nothing is executed again. Sphinx renders
them through myst-nb (its execution switched off) in the Jupyter Book theme (``sphinx-book-theme``):

* ``index.html``: the results table of the README (``results.publish.summary``), each verdict linked to the page of
  the notebook that computes it;
* ``theory.html``: the theory every notebook relies on, the cells of ``yun2022_section3`` from its first to its
  last heading "Theory ..." (Lemma 1 checked on the package's network; Eqs. 8-11, 26-27), outputs included;
* one chapter per paper (``papers.registry``: the papers and their notebooks in the registry's order), a page per
  published notebook with its tables and figures and, under its result, the commands that re-run it; beside the
  page, the notebook's folder of files (``<profile>/<name>/``: tables, figures, ``claims.json``) that its outputs
  link to;
* ``claims.html``: every claim with its numbers (``results.publish.full_table``, as ``reports/README.md``);
* a search box (Sphinx's search index, a script file: it works from disk); equations as MathML written at build
  time (``latex2mathml``), which the browser renders itself: no page loads anything from the network.

Every link is relative, so ``site/index.html`` opened from disk works and the folder can be served by any static
host. :func:`check` lists the links and images of the built site that do not resolve.
"""
from __future__ import annotations

import copy
import html.parser
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..papers import registry
from ..results import publish
from ..results.executed import notebook_parameters, published_notebooks

#: profiles in the order a chapter lists a notebook's published runs
PROFILE_ORDER = ("smoke", "cpu", "gpu", "paper")
#: the notebook whose opening cells are the theory chapter, and the heading those cells start with
THEORY_NOTEBOOK, THEORY_HEADING = "yun2022_section3", "Theory"
#: published parameters a re-run command leaves out: the runner's own options and what a re-render sets
_NOT_RERUN = ("profile", "results_dir", "collect", "download", "data_root")


@dataclass(frozen=True)
class Page:
    """One published notebook as a page: ``docname`` ("cpu/yun2022_table1"), its chapter (the paper), its title in
    the chapter's table of contents, and the executed notebook it is made from."""

    name: str
    profile: str
    source: Path
    paper: str
    reproduces: str

    @property
    def docname(self) -> str:
        return f"{self.profile}/{self.name}"

    @property
    def label(self) -> str:
        """The page's entry in its chapter's table of contents."""
        tail = "" if self.profile == "cpu" else f", {self.profile} profile"
        return f"{self.reproduces} ({self.name}{tail})" if self.reproduces else f"{self.name}{tail}"


#: the chapter of a published notebook that the registry does not know
OTHER = "Other notebooks"


def pages(reports: str | os.PathLike = "reports") -> list[Page]:
    """Every published notebook as a :class:`Page`, in reading order: the papers in the order of the registry, each
    paper's notebooks in the registry's order, a notebook's profiles smoke, cpu, gpu, paper; notebooks the
    registry does not know last (chapter :data:`OTHER`)."""
    order = {name: k for k, name in enumerate(registry.NOTEBOOKS)}
    papers = list(dict.fromkeys(nb.paper for nb in registry.NOTEBOOKS.values()))
    out = []
    for nb in published_notebooks(reports):
        known = registry.NOTEBOOKS.get(nb.stem)
        out.append(Page(nb.stem, nb.parent.name, nb, known.paper if known else OTHER,
                        known.reproduces if known else ""))
    rank = lambda p: (papers.index(p.paper) if p.paper in papers else len(papers),  # noqa: E731
                      order.get(p.name, len(order)), p.name,
                      PROFILE_ORDER.index(p.profile) if p.profile in PROFILE_ORDER else len(PROFILE_ORDER), p.profile)
    return sorted(out, key=rank)


def chapters(all_pages: list[Page]) -> dict[str, list[Page]]:
    """``{paper: [pages]}`` in reading order."""
    out: dict[str, list[Page]] = {}
    for p in all_pages:
        out.setdefault(p.paper, []).append(p)
    return out


def slug(text: str) -> str:
    """A file name for a chapter: "Li & Arora 2020" -> "li-arora-2020"."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "chapter"


def rerun_commands(page: Page) -> list[str]:
    """The commands that re-run a published notebook as it was published: ``python -m repro_lib run`` and ``make
    reproduce`` with its profile and the ``-p`` parameters it was published with (a notebook that reads a dataset
    gets ``-p data_root <folder>``, the folder holding it), then ``make report`` for re-rendering the published
    notebook from the published run store without training."""
    params = notebook_parameters(page.source)
    extra = [f"-p {k} {_shell_word(v)}" for k, v in sorted(params.items()) if k not in _NOT_RERUN]
    if "dataset" in params:
        extra.append("-p data_root <folder>")
    args = " ".join(extra)
    make_args = f' ARGS="{args}"' if args else ""
    return [f"python -m repro_lib run --profile {page.profile} {page.name}{' ' + args if args else ''}",
            f"make reproduce PROFILE={page.profile} NOTEBOOKS={page.name}{make_args}",
            f"make report NOTEBOOKS={page.name}"]


def _shell_word(value) -> str:
    text = str(value)
    return text if re.fullmatch(r"[\w.,:/+-]+", text) else "'" + text.replace("'", "'\\''") + "'"


def rerun_cell(page: Page) -> dict:
    """The markdown cell a notebook's page shows under its title: how to re-run it."""
    run, make, report = rerun_commands(page)
    text = (f"````{{admonition}} Re-run this notebook\n:class: tip\n"
            f"Train what your run store lacks and execute `notebooks/{page.name}.ipynb` into "
            f"`results/{page.profile}/` (either command):\n\n"
            f"```bash\n{run}\n{make}\n```\n\n"
            f"Re-render this page from the published runs in `reports/runs/` (nothing trains): `{report}`.\n````")
    return _markdown_cell(text, "repro-lib-rerun")


def _markdown_cell(text: str, cell_id: str) -> dict:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": text}


def page_notebook(page: Page, profile_in_title: bool = False) -> dict:
    """The executed notebook of ``page`` as the site shows it: its cells and outputs as published, the re-run
    commands (:func:`rerun_cell`) under its result (the ``publish.result_first()`` cell under the claim; else under
    the first cell); ``profile_in_title``: its title (the first line of the first cell) names the profile, for a
    notebook published in several."""
    nb = json.loads(page.source.read_text())
    cells = nb["cells"]
    if profile_in_title and cells and cells[0]["cell_type"] == "markdown":
        first, _, rest = "".join(cells[0]["source"]).partition("\n")
        if first.startswith("# "):
            cells[0]["source"] = f"{first} ({page.profile} profile)\n{rest}"
    result = next((k for k, c in enumerate(cells[:4]) if c["cell_type"] == "code"
                   and "result_first" in "".join(c["source"])), 0)
    cells.insert(result + 1, rerun_cell(page))
    return _with_ids(nb)


def _with_ids(nb: dict) -> dict:
    """``nb`` as nbformat 4.5 (every cell an ``id``; the published ones keep theirs)."""
    nb["nbformat"], nb["nbformat_minor"] = 4, max(5, nb.get("nbformat_minor", 0))
    for k, cell in enumerate(nb["cells"]):
        cell.setdefault("id", f"cell-{k}")
    return nb


def theory_notebook(source: Path, link: str) -> dict:
    """The theory chapter: the cells of ``source`` (``yun2022_section3``) from its first to its last markdown cell
    whose heading starts with "Theory", with their outputs, under a title and a line pointing to the whole notebook
    (``link``). ``ValueError`` where the notebook has no such heading."""
    nb = json.loads(Path(source).read_text())
    cells = nb["cells"]

    def heading(cell) -> str:
        if cell["cell_type"] != "markdown":
            return ""
        first = "".join(cell["source"]).lstrip().split("\n", 1)[0]
        return re.sub(r"^#+\s*", "", first) if first.startswith("#") else ""

    marks = [k for k, c in enumerate(cells) if heading(c).startswith(THEORY_HEADING)]
    if not marks:
        raise ValueError(f"{source}: no markdown heading starting with {THEORY_HEADING!r} for the theory chapter")
    titles = [heading(cells[k]).split(":", 1)[-1].strip() for k in marks]
    intro = ("# Theory\n\nThe theory every notebook of this book relies on, as "
             f"[{THEORY_NOTEBOOK}]({link}) (Yun et al. 2022, Sec. 3) opens with it: "
             + "; ".join(titles) + ". The code cell checks Lemma 1 on the package's own network; its output is the "
             "published one.")
    out = copy.deepcopy(nb)
    out["cells"] = [_markdown_cell(intro, "repro-lib-theory"),
                    *copy.deepcopy(cells[marks[0]:marks[-1] + 1])]
    return _with_ids(out)


def _links_to_pages(text: str, all_pages: list[Page], prefix: str = "") -> str:
    """Markdown links to a published notebook (``reports/cpu/x.ipynb``, any folder before ``<profile>/<name>``)
    pointed at its page (``prefix`` + ``cpu/x.ipynb``, a document link Sphinx resolves)."""
    known = {(p.profile, p.name) for p in all_pages}

    def repl(m):
        profile, name = m.group(2), m.group(3)
        return f"]({prefix}{profile}/{name}.ipynb)" if (profile, name) in known else m.group(0)

    return re.sub(r"\]\(((?:[^()\s]*/)?)([\w-]+)/([\w-]+)\.ipynb\)", repl, text)


def split_row(line: str) -> list[str]:
    """The cells of one Markdown table row (``| a | b \\| c |``: an escaped pipe stays in its cell)."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip() for c in re.split(r"(?<!\\)\|", body)]


def results_markdown(reports: str | os.PathLike, all_pages: list[Page]) -> str:
    """The README's results table (:func:`results.publish.summary` of ``reports``) with every notebook link and
    every verdict word pointing at the notebook's page."""
    verdict, notebook = publish.SHORT_COLUMNS.index("verdict"), publish.SHORT_COLUMNS.index("notebook")
    out = []
    for line in _links_to_pages(publish.summary(reports), all_pages).splitlines():
        cells = split_row(line) if line.startswith("|") else []
        if len(cells) == len(publish.SHORT_COLUMNS) and not line.startswith("|---"):
            m = re.fullmatch(r"\[[^\]]*\]\(([^)]*)\)", cells[notebook])
            if m and cells[verdict]:
                cells[verdict] = f"[{cells[verdict]}]({m.group(1)}){{.{verdict_class(cells[verdict])}}}"
            line = "| " + " | ".join(cells) + " |"
        out.append(line)
    return "\n".join(out)


def verdict_class(words: str) -> str:
    """The CSS class of a verdict cell: ``verdict-holds``, ``verdict-no``, ``verdict-undecided``,
    ``verdict-not-run`` where the group has one word, ``verdict-mixed`` where it counts several."""
    word = re.sub(r"\s+\d+$", "", words.strip())
    return "verdict-" + slug(word) if "/" not in words and word else "verdict-mixed"


def landing_markdown(reports: str | os.PathLike, all_pages: list[Page], chapter_docs: list[str],
                     theory: bool) -> str:
    """``index``: what the book holds, the results table, the table of contents."""
    toc = "\n".join([*(["theory"] if theory else []), *chapter_docs, "claims"])
    papers = len({p.paper for p in all_pages if p.paper != OTHER})
    count = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")[papers] if papers < 10 \
        else str(papers)
    count += " paper" if papers == 1 else " papers"
    first = (f"the [theory](theory.ipynb) every notebook relies on (Lemma 1, the effective learning rate, the angular "
             f"update and the tuning factor), then " if theory else "")
    return f"""# Scale-invariant networks: the reproductions

A network is *scale-invariant* when its loss does not change if the weights in front of a normalization layer are
rescaled: only their direction matters, and the learning rate, weight decay, momentum, batch size and data size act
on that direction through a few combined quantities. This book holds the executed notebooks of `repro_lib`, which
reproduces {count} about that effect: {first}one chapter per paper, each notebook with the paper's claim, our result
under it, the protocol, our tables and figures beside the paper's, and what we found. Every notebook page
says how to re-run it.

## Results at a glance

One row per claim group (a table's columns, a figure): *ours* and *paper's* in a few characters (for the Yun et al.
grids the rank of the yellow cell in each column, for a comparison the difference ± the half-width of its 95 %
interval, paired by seed). Every *verdict* is a word computed from the runs (*holds*, *no*, *undecided*, *not run*)
and links to the notebook that computes it. Every claim with its numbers and reason: [all claims](claims.md).

{results_markdown(reports, all_pages)}

```{{toctree}}
:maxdepth: 1
:hidden:

{toc}
```
"""


def chapter_markdown(paper: str, chapter_pages: list[Page]) -> str:
    """A paper's chapter: its notebooks, what each reproduces, each one's page in the table of contents."""
    rows = "\n".join(f"| [{p.name}]({p.docname}.ipynb) | {p.profile} | {p.reproduces or '—'} |"
                     for p in chapter_pages)
    toc = "\n".join(f"{p.label} <{p.docname}>" for p in chapter_pages)
    return f"""# {paper}

The notebooks of this chapter, in reading order:

| notebook | profile | reproduces |
|---|---|---|
{rows}

```{{toctree}}
:maxdepth: 1
:hidden:

{toc}
```
"""


#: the site's own style: wide tables get the room, long commands wrap
CSS = """\
.bd-page-width { max-width: 110rem; }
.bd-main .bd-content .bd-article-container { max-width: 72rem; }
div.math { overflow-x: auto; margin: 1em 0; }
div.math .eqno { float: right; }
.admonition pre, div.highlight pre { white-space: pre-wrap; word-break: break-word; }
table.docutils td, table.docutils th, .bd-article table td, .bd-article table th { padding: 0.3rem 0.5rem; }
.bd-article table { font-size: 0.9em; }
.bd-article h1 { font-size: 2.1rem; }
a.verdict-holds { color: #1a7f37; font-weight: 600; }
a.verdict-no { color: #cf222e; font-weight: 600; }
a.verdict-undecided { color: #9a6700; }
a.verdict-not-run, a.verdict-mixed { color: inherit; }
"""


def sphinx_config() -> dict:
    """The Sphinx configuration of the site (no ``conf.py``: everything here)."""
    conf = {
        "project": "repro_lib: reproductions of research on scale-invariant networks",
        "extensions": ["myst_nb", __name__],  # this module: the MathML renderer (setup)
        "html_math_renderer": "mathml",
        "html_theme": "sphinx_book_theme",
        "html_title": "Scale-invariant networks: the reproductions",
        "html_theme_options": {"use_download_button": False, "use_fullscreen_button": False,
                               "show_toc_level": 2, "home_page_in_toc": False, "navbar_persistent": [],
                               "footer_content_items": [],
                               # the wide tables of the landing page and of all claims get the page's width
                               "secondary_sidebar_items": {"**": ["page-toc"], "index": [], "claims": []}},
        "html_context": {"default_mode": "light"},
        "html_static_path": ["_site_static"],
        "html_extra_path": ["_extra"],  # each notebook's folder of tables and figures, beside its page
        "html_css_files": ["repro_lib.css"],
        "smartquotes": False,  # the text as written: "TEXP--" is a schedule's name, not an en dash
        "html_copy_source": False,
        "html_show_sourcelink": False,
        "html_show_sphinx": False,
        # the search page lists the pages that match; a summary would fetch() each page, which file:// refuses
        "html_show_search_summary": False,
        "html_last_updated_fmt": None,
        "nb_execution_mode": "off",
        "nb_merge_streams": True,
        "nb_render_markdown_format": "myst",  # the notebooks' Markdown results are tables
        "myst_enable_extensions": ["dollarmath", "amsmath", "attrs_inline"],
        "myst_heading_anchors": 3,
        "myst_update_mathjax": False,
        "suppress_warnings": ["myst.header", "mystnb.unknown_mime_type"],
        "exclude_patterns": ["_extra", "_site_static"],
    }
    return conf


def write_sources(reports: str | os.PathLike, src: str | os.PathLike) -> list[Page]:
    """Write the site's sources into ``src``: ``index.md``, ``theory.ipynb``, one ``<chapter>.md`` per paper, one
    ``<profile>/<name>.ipynb`` per published notebook and its folder of files (``_extra/<profile>/<name>/``, copied
    beside the page), ``claims.md``. Returns the pages."""
    src = Path(src)
    all_pages = pages(reports)
    if not all_pages:
        raise ValueError(f"reports: no published notebook under {reports}/<profile>/ to build a site from")
    names = [p.name for p in all_pages]
    for p in all_pages:
        (src / p.profile).mkdir(parents=True, exist_ok=True)
        (src / f"{p.docname}.ipynb").write_text(json.dumps(page_notebook(p, names.count(p.name) > 1)))
        files = p.source.parent / p.name  # its tables, figures, claims.json: the page's outputs link to them
        if files.is_dir():
            shutil.copytree(files, src / "_extra" / p.docname)
    (src / "_extra").mkdir(exist_ok=True)
    theory = next((p for p in all_pages if p.name == THEORY_NOTEBOOK), None)
    if theory is not None:
        (src / "theory.ipynb").write_text(json.dumps(theory_notebook(theory.source, f"{theory.docname}.ipynb")))
        files = theory.source.parent / theory.name  # what its outputs link to, beside the theory page too
        if files.is_dir():
            shutil.copytree(files, src / "_extra" / theory.name)
    chapter_docs = []
    for paper, chapter_pages in chapters(all_pages).items():
        doc = "chapter-" + slug(paper)
        (src / f"{doc}.md").write_text(chapter_markdown(paper, chapter_pages))
        chapter_docs.append(doc)
    (src / "index.md").write_text(landing_markdown(reports, all_pages, chapter_docs, theory is not None))
    claims = publish.full_table(reports).replace("# Published results: every claim", "# All claims", 1)
    claims = re.sub(r"<!--.*?-->\n*", "", claims).replace("The README's *Results at a glance*",
                                                          "[Results at a glance](index.md)")
    (src / "claims.md").write_text(_links_to_pages(claims, all_pages))
    (src / "_site_static").mkdir(exist_ok=True)
    (src / "_site_static" / "repro_lib.css").write_text(CSS)
    return all_pages


def mathml(latex: str, display: str = "inline") -> str:
    """LaTeX as MathML (``latex2mathml``), which browsers render themselves: no script, no font to fetch, so a
    page opened from disk shows its equations. ``ValueError`` naming the formula where it cannot be converted."""
    from latex2mathml.converter import convert

    text = latex.strip()
    if "\\\\" in text and "\\begin" not in text:  # several lines: aligned at their &
        text = "\\begin{align*}" + text + "\\end{align*}"
    try:
        return convert(text, display=display)
    except Exception as e:  # latex2mathml raises its own errors for LaTeX it does not know
        raise ValueError(f"math: cannot convert {latex!r} to MathML ({type(e).__name__}: {e})") from None


def _visit_math(self, node) -> None:
    from docutils import nodes

    self.body.append(self.starttag(node, "span", "", CLASS="math notranslate"))
    self.body.append(_mathml_or_source(self, node, node.astext(), "inline") + "</span>")
    raise nodes.SkipNode


def _visit_math_block(self, node) -> None:
    from docutils import nodes
    from sphinx.util.math import get_node_equation_number

    self.body.append(self.starttag(node, "div", CLASS="math notranslate"))
    if node.get("number"):
        self.body.append(f'<span class="eqno">({get_node_equation_number(self, node)})</span>')
    for part in (p for p in node.astext().split("\n\n") if p.strip()):
        self.body.append(_mathml_or_source(self, node, part, "block"))
    self.body.append("</div>\n")
    raise nodes.SkipNode


def _mathml_or_source(self, node, latex: str, display: str) -> str:
    """The MathML of ``latex``; where it cannot be converted, a Sphinx warning (:func:`build` fails on it) and the
    LaTeX source as code."""
    try:
        return mathml(latex, display)
    except ValueError as e:
        from sphinx.util import logging

        logging.getLogger(__name__).warning(str(e), location=node)
        return f"<code>{self.encode(latex)}</code>"


def setup(app) -> dict:
    """Sphinx extension: the ``mathml`` math renderer of the site (``html_math_renderer``)."""
    app.add_html_math_renderer("mathml", (_visit_math, None), (_visit_math_block, None))
    return {"parallel_read_safe": True, "parallel_write_safe": True}


class SiteError(RuntimeError):
    """The site did not build, or built with warnings (broken references, unreadable notebooks)."""


def build(reports: str | os.PathLike = "reports", out: str | os.PathLike = "site", quiet: bool = True,
          log=print) -> Path:
    """Build the site from the published notebooks in ``reports`` into ``out`` (replaced whole where it holds a site
    built before; any other non-empty folder is refused with a ``ValueError``); returns ``out/index.html``. A Sphinx
    warning (a link that does not resolve, a notebook it cannot read, an equation latex2mathml cannot convert) is a
    :class:`SiteError`, and so is a link or image of the built pages that does not resolve (:func:`check`)."""
    import io

    from sphinx.application import Sphinx
    from sphinx.util.console import nocolor

    nocolor()

    out = Path(out)
    if out.exists() and any(out.iterdir()) and not (out / ".buildinfo").exists():
        raise ValueError(f"out: {out} holds files and is not a site this command built (no .buildinfo): it would be "
                         "replaced whole; choose another folder")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="repro_lib_site_") as work:
        src, doctrees, html_dir = Path(work) / "src", Path(work) / "doctrees", Path(work) / "html"
        src.mkdir()
        all_pages = write_sources(reports, src)
        warnings = io.StringIO()
        app = Sphinx(str(src), None, str(html_dir), str(doctrees), "html",
                     confoverrides=sphinx_config(),
                     status=None if quiet else io.StringIO(), warning=warnings, freshenv=True,
                     keep_going=True)
        app.build()
        problems = [w for w in warnings.getvalue().splitlines() if w.strip()]
        if problems:
            raise SiteError("the site built with warnings:\n" + "\n".join(problems))
        broken = check(html_dir)
        if broken:
            raise SiteError("links or images that do not resolve:\n" + "\n".join(broken))
        sources = html_dir / "_sources"  # left empty: the pages do not link their sources
        if sources.is_dir() and not any(sources.iterdir()):
            sources.rmdir()
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(html_dir, out)
    if log:
        log(f"{out}/index.html: {len(all_pages)} notebook pages in {time.monotonic() - t0:.0f} s")
    return out / "index.html"


class _Refs(html.parser.HTMLParser):
    """The ``href`` / ``src`` values of one HTML page."""

    def __init__(self):
        super().__init__()
        self.refs: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if key in ("href", "src") and value is not None:
                self.refs.append((tag, value))


def page_refs(page: str | os.PathLike) -> list[tuple[str, str]]:
    """``(tag, url)`` of every ``href`` and ``src`` of an HTML file."""
    parser = _Refs()
    parser.feed(Path(page).read_text(errors="replace"))
    return parser.refs


def pages_of(site: str | os.PathLike) -> list[Path]:
    """The HTML pages of a built site (not the theme's template fragments under ``_static/``)."""
    site = Path(site)
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.relative_to(site).parts)


def check(site: str | os.PathLike) -> list[str]:
    """The links and images of every page of the built site that do not resolve, as "page: url (why)": a link to
    another host (the site must work offline: ``mailto:`` aside), an absolute path, or a relative file that is
    not there (an anchor ``#x`` in another page must exist there as an ``id``). Empty: every one resolves."""
    site = Path(site).resolve()
    bad, ids = [], {}

    def ids_of(path: Path) -> set[str]:
        if path not in ids:
            ids[path] = set(re.findall(r'\bid="([^"]+)"', path.read_text(errors="replace")))
        return ids[path]

    for page in pages_of(site):
        rel = page.relative_to(site)
        for tag, url in page_refs(page):
            parts = urlsplit(url)
            if parts.scheme in ("mailto", "data", "javascript"):
                continue
            if parts.scheme or parts.netloc:
                bad.append(f"{rel}: {url} (another host: the site works offline)")
                continue
            if not parts.path:
                if parts.fragment and parts.fragment not in ids_of(page) and tag == "a":
                    bad.append(f"{rel}: {url} (no such anchor)")
                continue
            if parts.path.startswith("/"):
                bad.append(f"{rel}: {url} (absolute path: links are relative)")
                continue
            target = (page.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file() or site not in target.parents:
                bad.append(f"{rel}: {url} (no such file in the site)")
            elif parts.fragment and target.suffix == ".html" and parts.fragment not in ids_of(target):
                bad.append(f"{rel}: {url} (no such anchor)")
    return bad


def main(argv=None) -> int:
    """``python -m repro_lib site [REPORTS] [--out site]``."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m repro_lib site",
                                 description="The published notebooks (REPORTS/<profile>/*.ipynb) as one static "
                                             "website in OUT, nothing executed: the results table, the theory, a "
                                             "chapter per paper, search. Open OUT/index.html from disk or serve "
                                             "the folder.")
    ap.add_argument("reports", nargs="?", default="reports", help="the published results (default: reports)")
    ap.add_argument("--out", default="site", help="the site's folder, replaced whole (default: site)")
    args = ap.parse_args(argv)
    try:
        build(args.reports, args.out)
    except ImportError as e:
        print(f"error: the site needs {e.name} (requirements-nopins.txt; `make site` installs it): {e}",
              file=sys.stderr)
        return 2
    except (ValueError, SiteError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0
