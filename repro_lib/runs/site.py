"""The published notebooks as one static website, read like a book (``make site``, ``python -m repro_lib site``).

Built from the executed notebooks in ``reports/<profile>/`` as they are: nothing is executed again. Sphinx renders
them through myst-nb (its execution switched off) in the Jupyter Book theme (``sphinx-book-theme``):

* ``index.html``: the bottom line and the results table of the README (``results.publish.summary``, what
  ``python -m repro_lib summary`` writes there), each verdict linked to the page of the notebook that computes it;
* ``theory.html``: the theory every notebook relies on, the cells of ``yun2022_section3`` from its first to its
  last heading "Theory ..." (Lemma 1 checked on the package's network; Eqs. 8-11, 26-27), outputs included;
* one chapter per paper (``papers.registry``: the papers and their notebooks in the registry's order, a paper's
  pooled answer first): the chapter's page gives each notebook's verdicts counted and its claims with their
  verdicts (from the ``claims.json`` it recorded), then a page per published notebook with its tables and figures
  and, at its end, the commands that re-run it; beside the page, the notebook's folder of files
  (``<profile>/<name>/``: tables, figures, ``claims.json``) that its outputs link to;
* ``claims.html``: every claim with its numbers (``results.publish.full_table``, as ``reports/README.md``);
* ``glossary.html``: the terms, from ``docs/glossary.md`` where it exists (not built where it does not);
* a search box (Sphinx's search index, a script file: it works from disk); equations as MathML written at build
  time (``latex2mathml``), which the browser renders itself: no page loads anything from the network.

A notebook's page shows what a reader needs: the cells only the runner reads (parameters, the one-line verdict)
are left out and set-up code is folded (:func:`book_tags`, tags added to the copies the site is built from; the
notebooks keep their cells); figures take the content's width and link to themselves at full size; a table wider
than the page scrolls sideways (``site_static/repro_lib.css``). Every page the site builds is in its navigation.

Every link is relative, so ``site/index.html`` opened from disk works and the folder can be served by any static
host. :func:`check` lists the links and images of the built site that do not resolve.
"""
from __future__ import annotations

import ast
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
from ..results import findings, publish
from ..results.executed import notebook_parameters, published_notebooks

#: profiles in the order a chapter lists a notebook's published runs
PROFILE_ORDER = ("smoke", "cpu", "gpu", "paper")
#: the notebook whose opening cells are the theory chapter, and the heading those cells start with
THEORY_NOTEBOOK, THEORY_HEADING = "yun2022_section3", "Theory"
#: published parameters a re-run command leaves out: the runner's own options and what a re-render sets
_NOT_RERUN = ("profile", "results_dir", "collect", "download", "data_root")
#: the site's own files (style sheet, favicon), copied into every build
STATIC = Path(__file__).with_name("site_static")
#: where the glossary's source lives beside ``reports/`` (a book page where it exists)
GLOSSARY = Path("docs") / "glossary.md"
#: the order verdict words are counted in (:func:`verdict_counts`); any other word follows, alphabetically
WORD_ORDER = tuple(dict.fromkeys(("holds", "no", "undecided", "not judged", *findings.VERDICTS, "not run")))


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
    paper's notebooks in the registry's order after its pooled answer (:func:`opens_chapter`), a notebook's
    profiles smoke, cpu, gpu, paper; notebooks the registry does not know last (chapter :data:`OTHER`)."""
    order = {name: k for k, name in enumerate(registry.NOTEBOOKS)}
    papers = list(dict.fromkeys(nb.paper for nb in registry.NOTEBOOKS.values()))
    out = []
    for nb in published_notebooks(reports):
        known = registry.NOTEBOOKS.get(nb.stem)
        out.append(Page(nb.stem, nb.parent.name, nb, known.paper if known else OTHER,
                        known.reproduces if known else ""))
    rank = lambda p: (papers.index(p.paper) if p.paper in papers else len(papers),  # noqa: E731
                      not opens_chapter(p.name), order.get(p.name, len(order)), p.name,
                      PROFILE_ORDER.index(p.profile) if p.profile in PROFILE_ORDER else len(PROFILE_ORDER), p.profile)
    return sorted(out, key=rank)


def opens_chapter(name: str) -> bool:
    """Whether a notebook opens its paper's chapter: a paper's pooled answer over its other notebooks (a name ending
    in ``_summary``, e.g. ``yun2022_summary``) is what a reader of the chapter wants first."""
    return name.endswith("_summary")


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


#: the heading of the section that ends every notebook page (:func:`rerun_cell`)
RERUN_HEADING = "Re-run this notebook"


def rerun_cell(page: Page) -> dict:
    """The markdown cell that ends a notebook's page: how to re-run it, and how to build the data it reads where the
    package builds it (``data_build.build_command``). At the end: the notebook's first screen has its own one-line
    re-run command, and the page's table of contents lists this section."""
    from ..data_build import build_command

    run, make, report = rerun_commands(page)
    data = build_command(notebook_parameters(page.source).get("dataset"))
    data = (f"The data it reads: `{data} --root <folder>` builds it (`make data`: into `./data`).\n\n"
            if data else "")
    text = (f"## {RERUN_HEADING}\n\n"
            f"Train what your run store lacks and execute `notebooks/{page.name}.ipynb` into "
            f"`results/{page.profile}/` (either command):\n\n"
            f"```{{code-block}} bash\n:class: rerun-commands\n\n{run}\n{make}\n```\n\n{data}"
            f"Re-render this page from the published runs in `reports/runs/` (nothing trains): `{report}`.\n")
    return _markdown_cell(text, "repro-lib-rerun")


def _markdown_cell(text: str, cell_id: str) -> dict:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": text}


#: myst-nb's tags that already say how a cell shows; a cell carrying one keeps its own choice
SHOW_TAGS = ("remove-cell", "remove_cell", "remove-input", "remove_input", "hide-input", "hide_input",
             "hide-cell", "hide_cell", "remove-output", "remove_output", "hide-output", "hide_output")
#: tags of the cells only the runner reads: papermill's parameters and the one-line verdict of ``repro_lib run``
RUNNER_TAGS = ("parameters", "injected-parameters", "verdict")
#: calls that make a code cell set-up rather than content: the parameter check (the validation cell, which also
#: holds the notebook's imports and set-up) and the recording of the claims for the results table
SETUP_CALLS = ("check_params(", "record_claims(")


def _imports_only(source: str) -> bool:
    """Whether a code cell's every statement is an import (comments and blank lines aside)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython syntax (magics): not a plain import cell
        return False
    return bool(tree.body) and all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in tree.body)


def book_tags(cell: dict) -> list[str]:
    """The myst-nb tags the book adds to one cell of a published notebook (the notebook itself keeps its cells as
    they are): what a reader of the page does not need stays out of the way, by one rule --

    * the cells only the runner reads (tagged ``parameters``, ``injected-parameters``: the re-run commands give
      the parameters a notebook was published with; ``verdict``: the result says it) are removed (``remove-cell``);
    * the result cell (``publish.result_first()``) shows its result without its code (``remove-input``);
    * set-up cells -- the validation cell (``check_params(...)``, with the imports and set-up it holds), an
      import-only cell, the cell recording the claims (``record_claims(...)``) -- show their outputs with their code
      folded behind a toggle (``hide-input``), or are removed where they print nothing (``remove-cell``).

    Markdown cells, other code cells and a cell that already carries a tag of :data:`SHOW_TAGS` get none."""
    tags = cell.get("metadata", {}).get("tags", [])
    if cell.get("cell_type") != "code" or any(t in SHOW_TAGS for t in tags):
        return []
    if any(t in RUNNER_TAGS for t in tags):
        return ["remove-cell"]
    source = "".join(cell.get("source", ""))
    if "result_first()" in source:
        return ["remove-input"]
    if any(call in source for call in SETUP_CALLS) or _imports_only(source):
        return ["hide-input"] if cell.get("outputs") else ["remove-cell"]
    return []


def _tagged_for_the_book(nb: dict) -> dict:
    """``nb`` with :func:`book_tags` added to every cell's tags."""
    for cell in nb["cells"]:
        extra = book_tags(cell)
        if extra:
            meta = cell.setdefault("metadata", {})
            meta["tags"] = [*meta.get("tags", []), *extra]
    return nb


def page_notebook(page: Page, profile_in_title: bool = False, glossary: str | None = None) -> dict:
    """The executed notebook of ``page`` as the site shows it: its cells and outputs as published with the tags of
    :func:`book_tags`, the re-run commands (:func:`rerun_cell`) at its end, links to the glossary's source pointed at
    the book's glossary page (``glossary``: its document name; None: the book has none, :func:`glossary_links`);
    ``profile_in_title``: its title (the first line of the first cell) names the profile, for a notebook published
    in several."""
    nb = json.loads(page.source.read_text())
    cells = nb["cells"]
    if profile_in_title and cells and cells[0]["cell_type"] == "markdown":
        first, _, rest = "".join(cells[0]["source"]).partition("\n")
        if first.startswith("# "):
            cells[0]["source"] = f"{first} ({page.profile} profile)\n{rest}"
    cells.append(rerun_cell(page))
    return _with_ids(_glossary_links(_tagged_for_the_book(nb), glossary, prefix="../"))


def _with_ids(nb: dict) -> dict:
    """``nb`` as nbformat 4.5 (every cell an ``id``; the published ones keep theirs)."""
    nb["nbformat"], nb["nbformat_minor"] = 4, max(5, nb.get("nbformat_minor", 0))
    for k, cell in enumerate(nb["cells"]):
        cell.setdefault("id", f"cell-{k}")
    return nb


def theory_notebook(source: Path, link: str, glossary: str | None = None) -> dict:
    """The theory chapter: the cells of ``source`` (``yun2022_section3``) from its first to its last markdown cell
    whose heading starts with "Theory", with their outputs and the tags of :func:`book_tags`, under a title and a
    line pointing to the whole notebook (``link``); links to the glossary as in :func:`page_notebook`.
    ``ValueError`` where the notebook has no such heading."""
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
    return _with_ids(_glossary_links(_tagged_for_the_book(out), glossary))


#: a Markdown link to the glossary's source, from wherever it was written (``../../docs/glossary.md#term``)
_GLOSSARY_MD = re.compile(r"\[([^\]]*)\]\(<?(?:[^()\s<>]*/)?glossary\.md(#[^()\s<>]*)?>?\)")
_GLOSSARY_HREF = re.compile(r'href="(?:[^"]*/)?glossary\.(?:md|html)(#[^"]*)?"')


def glossary_links(text: str, glossary: str | None, prefix: str = "", html: bool = False) -> str:
    """``text`` (Markdown; ``html``: HTML) with every link to the glossary's source (``docs/glossary.md``, any
    folder before it, an anchor kept) pointed at the book's glossary page (``prefix`` + ``glossary.md``, or
    ``glossary.html`` in HTML); where the book has no glossary (``glossary`` None) a Markdown link keeps its text
    only."""
    if html:
        return _GLOSSARY_HREF.sub(lambda m: f'href="{prefix}glossary.html{m.group(1) or ""}"', text) if glossary \
            else text
    return _GLOSSARY_MD.sub(lambda m: f"[{m.group(1)}]({prefix}glossary.md{m.group(2) or ''})" if glossary
                            else m.group(1), text)


def _glossary_links(nb: dict, glossary: str | None, prefix: str = "") -> dict:
    """:func:`glossary_links` in every markdown cell and every Markdown or HTML output of ``nb``."""
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = glossary_links("".join(cell["source"]), glossary, prefix)
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            for mime, html in (("text/markdown", False), ("text/html", True)):
                if mime in data:
                    data[mime] = glossary_links("".join(data[mime]), glossary, prefix, html)
    return nb


def _links_to_pages(text: str, all_pages: list[Page], prefix: str = "") -> str:
    """Markdown links to a published notebook (``reports/cpu/x.ipynb``, any folder before ``<profile>/<name>``)
    pointed at its page (``prefix`` + ``cpu/x.ipynb``, a document link Sphinx resolves)."""
    known = {(p.profile, p.name) for p in all_pages}

    def repl(m):
        profile, name = m.group(2), m.group(3)
        return f"]({prefix}{profile}/{name}.ipynb)" if (profile, name) in known else m.group(0)

    return re.sub(r"\]\(((?:[^()\s]*/)?)([\w-]+)/([\w-]+)\.ipynb\)", repl, text)


#: a Markdown link to the every-claim table's source (``reports/README.md``), the book's ``claims`` page
_CLAIMS_MD = re.compile(r"\]\(<?(?:[^()\s<>]*/)?reports/README\.md(?:#[^()\s<>]*)?>?\)")


def book_links(text: str, all_pages: list[Page], glossary: str | None, docs: set[str] | None = None) -> str:
    """Markdown written for the repository (the README's results, the glossary, ``reports/README.md``) with its links
    pointed into the book: a published notebook at its page (:func:`_links_to_pages`), ``reports/README.md`` at
    ``claims.md``, the glossary's source at the glossary page (:func:`glossary_links`); with ``docs`` (the book's
    documents), a link to any other document or to another host keeps its text only (the site works offline and
    holds no other file of the repository)."""
    text = glossary_links(_links_to_pages(text, all_pages), glossary)
    text = _CLAIMS_MD.sub("](claims.md)", text).replace("[`reports/README.md`](claims.md)", "[all claims](claims.md)")
    if docs is None:
        return text

    def unlink(m):
        url = m.group(2).strip("<>")
        path = url.split("#", 1)[0]
        if url.startswith("#") or path in docs:
            return m.group(0)
        if urlsplit(url).scheme or path.endswith((".md", ".ipynb", ".py", ".txt", ".toml", ".yml")) or path == "":
            return m.group(1)
        return m.group(0)

    return re.sub(r"(?<!!)\[([^\]]*)\]\(([^()\s]*)\)", unlink, text)


def book_docs(all_pages: list[Page], chapter_docs: list[str] = (), glossary: bool = False) -> set[str]:
    """The Markdown names of the book's documents (``index.md``, ``claims.md``, ``cpu/x.ipynb``, ...)."""
    return {"index.md", "claims.md", "theory.ipynb", *(f"{d}.md" for d in chapter_docs),
            *(["glossary.md"] if glossary else []), *(f"{p.docname}.ipynb" for p in all_pages)}


def split_row(line: str) -> list[str]:
    """The cells of one Markdown table row (``| a | b \\| c |``: an escaped pipe stays in its cell)."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip() for c in re.split(r"(?<!\\)\|", body)]


def results_markdown(reports: str | os.PathLike, all_pages: list[Page], text: str | None = None) -> str:
    """The README's results table (:func:`results.publish.summary` of ``reports``, or ``text``, a part of it) with
    every notebook link pointing at the notebook's page and every verdict linked to where it is computed: the
    notebook's page, or, for a row whose verdicts several notebooks compute, the chapter listing each one's."""
    verdict, notebook = publish.SHORT_COLUMNS.index("verdict"), publish.SHORT_COLUMNS.index("notebook")
    chapter_of = {p.docname: "chapter-" + slug(p.paper) for p in all_pages}
    out = []
    text = publish.summary(reports) if text is None else text
    for line in _links_to_pages(text, all_pages).splitlines():
        cells = split_row(line) if line.startswith("|") else []
        if len(cells) == len(publish.SHORT_COLUMNS) and not line.startswith("|---"):
            links = re.findall(r"\]\(([^)]*)\.ipynb\)", cells[notebook])
            target = (f"{links[0]}.ipynb" if len(links) == 1 else
                      f"{chapter_of[links[0]]}.md" if links and links[0] in chapter_of else "")
            if target and cells[verdict]:
                cells[verdict] = f"[{cells[verdict]}]({target}){{.{verdict_class(cells[verdict])}}}"
            line = "| " + " | ".join(cells) + " |"
        out.append(line)
    return "\n".join(out)


def summary_parts(reports: str | os.PathLike = "reports") -> tuple[str, str]:
    """:func:`results.publish.summary` (what ``python -m repro_lib summary`` writes into the README between its
    markers) as ``(bottom line, tables)``: the paragraphs before its first table or table caption (a bold profile
    line such as "**`cpu` profile · …**"), and the rest."""
    paragraphs = re.split(r"\n\s*\n", publish.summary(reports).strip())
    k = next((i for i, par in enumerate(paragraphs)
              if par.lstrip().startswith(("**`", "|")) or "\n|" in par), len(paragraphs))
    return "\n\n".join(paragraphs[:k]).strip(), "\n\n".join(paragraphs[k:]).strip()


def claims_of(page: Page) -> list[dict]:
    """The claims a published notebook recorded (``<profile>/<name>/claims.json`` beside it; [] without one)."""
    path = page.source.parent / page.name / "claims.json"
    if not path.is_file():
        return []
    claims = json.loads(path.read_text())
    return claims if isinstance(claims, list) else []


def claim_word(claim: dict) -> str:
    """A claim's verdict word: "not run" where no run is behind it (``publish.not_run``), else its ``word`` (a
    claim written without one: the word its verdict starts with, one of :data:`WORD_ORDER`; "" where none)."""
    if publish.not_run(claim):
        return "not run"
    if claim.get("word"):
        return str(claim["word"])
    verdict = str(claim.get("verdict", "")).strip()
    return next((w for w in sorted(WORD_ORDER, key=len, reverse=True)
                 if re.match(rf"{re.escape(w)}\b", verdict)), "")


def verdict_counts(claims: list[dict]) -> list[tuple[str, int]]:
    """``[(word, count)]`` of every verdict word the claims carry (:func:`claim_word`), in the order of
    :data:`WORD_ORDER`, any other word after them alphabetically; a claim without a word is not counted."""
    words = [w for w in map(claim_word, claims) if w]
    return [(w, words.count(w)) for w in sorted(set(words), key=lambda w: (
        WORD_ORDER.index(w) if w in WORD_ORDER else len(WORD_ORDER), w))]


def counts_markdown(counts: list[tuple[str, int]]) -> str:
    """"holds 2 · undecided 4", each word in the style of its verdict (``verdict-holds``, ...)."""
    return " · ".join(f"[{w} {n}]{{.{verdict_class(w)}}}" for w, n in counts)


def _short(text: str, limit: int = 110) -> str:
    """``text`` cut at its last separator before ``limit`` characters (an ellipsis marks the cut)."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = max(text.rfind(sep, 0, limit) for sep in (", ", "; ", " ("))
    return (text[:cut] if cut > limit // 2 else text[:limit].rsplit(" ", 1)[0]) + " …"


def _md_text(text: str) -> str:
    """Plain text safe inside a Markdown paragraph or list item (``|``, ``*``, ``_``, ``$``, brackets escaped)."""
    return re.sub(r"([\\`*_\[\]$|<>])", r"\\\1", text)


#: the claims a chapter page lists under a notebook (the rest: "… more on its page")
CHAPTER_CLAIMS = 4


def bottom_line(claims: list[dict], limit: int = CHAPTER_CLAIMS) -> list[str]:
    """A notebook's bottom line as list items, computed from its claims: each distinct claim (in the notebook's
    order; the columns of a grid that share a claim's words are one item) with its verdict -- the word and our
    value where it is one claim, the words with their counts where it is several -- at most ``limit`` items and a
    last one saying how many more the page holds."""
    groups: dict[str, list[dict]] = {}
    for c in claims:
        groups.setdefault(str(c.get("claim", c.get("item", ""))), []).append(c)
    items = []
    for text, group in groups.items():
        if len(group) == 1:
            word, ours = claim_word(group[0]), str(group[0].get("ours") or "").strip()
            said = f"[{word}]{{.{verdict_class(word)}}}" if word else "no verdict"
            said += f" ({_md_text(_short(ours, 70))})" if ours else ""
        else:
            said = f"{len(group)} columns: " + counts_markdown(verdict_counts(group))
        items.append(f"{_md_text(_short(text))} — {said}")
    more = len(items) - limit
    return items[:limit] + ([f"… and {more} more claim{'s' if more > 1 else ''} on its page"] if more > 0 else [])


def verdict_class(words: str) -> str:
    """The CSS class of a verdict cell: ``verdict-holds``, ``verdict-no``, ``verdict-undecided``,
    ``verdict-not-judged``, ``verdict-not-run`` where the group has one word (its count after it or not),
    ``verdict-mixed`` where it counts several ("holds 2 · undecided 1")."""
    word = re.sub(r"\s+\d+$", "", words.strip())
    return "verdict-" + slug(word) if word and not re.search(r"[\d/·,;]", word) else "verdict-mixed"


def counts_line(all_pages: list[Page]) -> str:
    """The verdicts of every published claim counted, one sentence per profile ("**`cpu` profile**: 81 claims
    in 21 notebooks — holds 19 · undecided 62."): the landing page's bottom line where the README's results say
    none."""
    by_profile: dict[str, list[tuple[Page, list[dict]]]] = {}
    for p in all_pages:
        by_profile.setdefault(p.profile, []).append((p, claims_of(p)))
    lines = []
    for profile, found in sorted(by_profile.items(), key=lambda kv: PROFILE_ORDER.index(kv[0])
                                 if kv[0] in PROFILE_ORDER else len(PROFILE_ORDER)):
        claims = [c for _, cl in found for c in cl]
        if claims:
            books = len([p for p, cl in found if cl])
            lines.append(f"**`{profile}` profile**: {len(claims)} claim{'s' if len(claims) != 1 else ''} in {books} "
                         f"notebook{'s' if books != 1 else ''} — {counts_markdown(verdict_counts(claims))}.")
    return "\n\n".join(lines)


#: the verdict words as the book explains them where it has no glossary (the words a claim's ``word`` holds)
WORDS_EXPLAINED = ("one of five words: *holds* (the interval lies on the claimed side), *no* (on the other side), "
                   "*undecided* (the interval is within the noise), *not judged* (the regime the claim speaks of was "
                   "not reached), *not run*")


def landing_markdown(reports: str | os.PathLike, all_pages: list[Page], chapter_docs: list[str],
                     theory: bool, glossary: bool = False) -> str:
    """``index``: what the book holds in a few lines, the bottom line (the head of the README's results,
    :func:`summary_parts`; where it has none, the verdicts counted, :func:`counts_line`), the results table, the
    table of contents."""
    toc = "\n".join([*(["theory"] if theory else []), *chapter_docs, "claims", *(["glossary"] if glossary else [])])
    papers = len({p.paper for p in all_pages if p.paper != OTHER})
    count = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")[papers] if papers < 10 \
        else str(papers)
    count += " paper" if papers == 1 else " papers"
    first = (f"the [theory](theory.ipynb) every notebook relies on (Lemma 1, the effective learning rate, the angular "
             f"update and the tuning factor), then " if theory else "")
    head, tables = summary_parts(reports)
    linked = "glossary" if glossary else None
    head = book_links(head, all_pages, linked, book_docs(all_pages, chapter_docs, glossary))
    words = ("one of five words, each defined in the [glossary](glossary.md): *holds*, *no*, *undecided*, "
             "*not judged*, *not run*" if glossary else WORDS_EXPLAINED)
    return f"""# Scale-invariant networks: the reproductions

A network is *scale-invariant* when its loss does not change if the weights in front of a normalization layer are
rescaled: only their direction matters, and the learning rate, weight decay, momentum, batch size and data size act
on that direction through a few combined quantities. This book holds the executed notebooks of `repro_lib`, which
reproduces {count} about that effect.

```{{container}} bottom-line
{head or counts_line(all_pages)}
```

## Results at a glance

One row per claim group (a table's columns, a figure), each verdict linked to the notebook that computes it. Every
*verdict* is computed from the runs, {words}. Every claim with its numbers and reason: [all claims](claims.md).

{results_markdown(reports, all_pages, book_links(tables, all_pages, linked))}

## How to read this book

It opens with {first}one chapter per paper, each notebook with the paper's claim, our result under it, the
protocol, our tables and figures beside the paper's, and what we found. Every notebook page says how to re-run it.

```{{toctree}}
:maxdepth: 1
:hidden:

{toc}
```
"""


def chapter_markdown(paper: str, chapter_pages: list[Page]) -> str:
    """A paper's chapter: for each of its notebooks (in reading order) a section linking to its page, with what it
    reproduces, its verdicts counted and its bottom line (:func:`bottom_line`), computed from the claims it
    recorded; each notebook's page in the table of contents."""
    sections = []
    for p in chapter_pages:
        claims = claims_of(p)
        title = p.reproduces or p.name
        profile = "" if p.profile == "cpu" else f", {p.profile} profile"
        head = (f"{len(claims)} claim{'s' if len(claims) != 1 else ''}: {counts_markdown(verdict_counts(claims))}"
                if claims else "no claims recorded")
        items = "\n".join(f"- {line}" for line in bottom_line(claims))
        sections.append(f"## [{_md_text(title)}{profile}]({p.docname}.ipynb)\n\n"
                        f"`{p.name}` · {head}\n\n{items}".rstrip())
    toc = "\n".join(f"{p.label} <{p.docname}>" for p in chapter_pages)
    listed = "\n\n".join(sections)
    return f"""# {paper}

The notebooks of this chapter in reading order, each with its verdicts and its claims (the page of each says how the
verdicts were reached).

{listed}

```{{toctree}}
:maxdepth: 1
:hidden:

{toc}
```
"""


def glossary_markdown(text: str, all_pages: list[Page], chapter_docs: list[str] = ()) -> str:
    """The glossary page from its source (``docs/glossary.md``, :func:`book_links`): links to a published notebook
    point at its page, links to the glossary itself stay on the page, a link to anything else the book does not hold
    (another file of the repository, another host) keeps its text only; a title where it has none."""
    text = book_links(text, all_pages, "glossary", book_docs(all_pages, chapter_docs, True))
    return text if re.match(r"\s*# ", text) else "# Glossary\n\n" + text


def sphinx_config() -> dict:
    """The Sphinx configuration of the site (no ``conf.py``: everything here)."""
    conf = {
        "project": "repro_lib: reproductions of research on scale-invariant networks",
        "extensions": ["myst_nb", __name__],  # this module: the MathML renderer (setup)
        "html_math_renderer": "mathml",
        "html_theme": "sphinx_book_theme",
        "html_title": "Scale-invariant networks: the reproductions",
        "html_favicon": "_site_static/favicon.svg",
        "html_theme_options": {"use_download_button": False, "use_fullscreen_button": False,
                               "show_toc_level": 2, "home_page_in_toc": False, "navbar_persistent": [],
                               "footer_content_items": [],
                               # the wide tables of the landing page and of all claims get the page's width
                               "secondary_sidebar_items": {"**": ["page-toc"], "index": [], "claims": []}},
        "html_context": {"default_mode": "light"},
        "html_static_path": ["_site_static"],
        "html_extra_path": ["_extra"],  # each notebook's folder of tables and figures, beside its page
        "html_css_files": ["repro_lib.css"],
        "html_use_index": False,  # no general index: every page the site builds is in its navigation
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
        # every figure at the content's width (the style sheet keeps that below its own size on a wide screen) and,
        # being scaled, a link to itself at full size (Sphinx's html_scaled_image_link)
        "nb_render_image_options": {"width": "100%"},
        "nb_code_prompt_show": "Show the code",
        "nb_code_prompt_hide": "Hide the code",
        "myst_enable_extensions": ["dollarmath", "amsmath", "attrs_inline"],
        "myst_dmath_double_inline": True,  # $$…$$ inside a paragraph or a list item is display math, as in Jupyter
        "myst_heading_anchors": 3,
        "myst_update_mathjax": False,
        "suppress_warnings": ["myst.header", "mystnb.unknown_mime_type"],
        "exclude_patterns": ["_extra", "_site_static"],
    }
    return conf


def glossary_source(reports: str | os.PathLike) -> Path:
    """Where the glossary's source of a ``reports`` folder is: ``docs/glossary.md`` beside it."""
    return Path(reports).resolve().parent / GLOSSARY


def write_sources(reports: str | os.PathLike, src: str | os.PathLike,
                  glossary: str | os.PathLike | None = None) -> list[Page]:
    """Write the site's sources into ``src``: ``index.md``, ``theory.ipynb``, one ``<chapter>.md`` per paper, one
    ``<profile>/<name>.ipynb`` per published notebook and its folder of files (``_extra/<profile>/<name>/``, copied
    beside the page), ``claims.md``, ``glossary.md`` where the glossary's source exists (``glossary``; default
    :func:`glossary_source`), the style sheet and the favicon. Returns the pages."""
    src = Path(src)
    all_pages = pages(reports)
    if not all_pages:
        raise ValueError(f"reports: no published notebook under {reports}/<profile>/ to build a site from")
    glossary = Path(glossary) if glossary is not None else glossary_source(reports)
    has_glossary = glossary.is_file()
    linked = "glossary" if has_glossary else None
    names = [p.name for p in all_pages]
    for p in all_pages:
        (src / p.profile).mkdir(parents=True, exist_ok=True)
        (src / f"{p.docname}.ipynb").write_text(json.dumps(page_notebook(p, names.count(p.name) > 1, linked)))
        files = p.source.parent / p.name  # its tables, figures, claims.json: the page's outputs link to them
        if files.is_dir():
            shutil.copytree(files, src / "_extra" / p.docname)
    (src / "_extra").mkdir(exist_ok=True)
    theory = next((p for p in all_pages if p.name == THEORY_NOTEBOOK), None)
    if theory is not None:
        (src / "theory.ipynb").write_text(json.dumps(theory_notebook(theory.source, f"{theory.docname}.ipynb",
                                                                     linked)))
        files = theory.source.parent / theory.name  # what its outputs link to, beside the theory page too
        if files.is_dir():
            shutil.copytree(files, src / "_extra" / theory.name)
    chapter_docs = []
    for paper, chapter_pages in chapters(all_pages).items():
        doc = "chapter-" + slug(paper)
        (src / f"{doc}.md").write_text(chapter_markdown(paper, chapter_pages))
        chapter_docs.append(doc)
    (src / "index.md").write_text(landing_markdown(reports, all_pages, chapter_docs, theory is not None,
                                                   has_glossary))
    claims = publish.full_table(reports).replace("# Published results: every claim", "# All claims", 1)
    claims = re.sub(r"<!--.*?-->\n*", "", claims).replace("The README's *Results at a glance*",
                                                          "[Results at a glance](index.md)")
    (src / "claims.md").write_text(book_links(claims, all_pages, linked))
    if has_glossary:
        (src / "glossary.md").write_text(glossary_markdown(glossary.read_text(), all_pages, chapter_docs))
    shutil.copytree(STATIC, src / "_site_static", dirs_exist_ok=True)
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
