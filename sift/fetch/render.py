"""Turn a decoded response body into what the caller asked for: one function per mode.

`clean` is the main content as Markdown: trafilatura (which measured best on public benchmarks,
see docs/EXTRACTION.md) chooses it, and `mainblocks` cuts the page's own markup down to it so
links, images, code languages and definition lists survive; `markdown` is the whole page as
Markdown (`htmlmd`, the same renderer); `text` is the main content as plain text, code blocks
with their indentation; `raw` is the body as received; `links` lists the page's absolute
http(s) links. HTML pages also give their metadata (`pagemeta`). JSON, XML feeds, Markdown and
plain text get the closest sensible reading of each mode. PDFs are not rendered here: see
`sift.fetch.pdf`.

Everything is synchronous and CPU-bound; callers run it off the event loop.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import re
from dataclasses import dataclass, field
from urllib.parse import urldefrag, urljoin, urlsplit

import lxml.etree
import lxml.html
import orjson
import trafilatura

from sift.errors import InvalidTarget, Unsupported
from sift.fetch import contenttype, htmlmd, mainblocks, pagemeta, verdict
from sift.fetch.contenttype import decode
from sift.fetch.envelope import well_formed
from sift.fetch.htmlmd import DROP as _DROP_FOR_MARKDOWN
from sift.fetch.htmlmd import tidy
from sift.fetch.target import MODES

# A page whose visible text is shorter than this and that runs scripts is an app shell.
SCRIPT_ONLY_MAX_TEXT = 64
TITLE_MAX = 300
SHORT_EXTRACT = 250  # below this, trafilatura has fallen back to its baseline
CODE_BLOCKS_MAX = 500  # code blocks of a page given back their whitespace in text mode
CODE_TRIES = 16  # places a code block's first line is tried at
FEED_SUMMARY_MAX = 1000

_DROP_FOR_FALLBACK = (*_DROP_FOR_MARKDOWN, "nav", "header", "footer", "aside", "form", "button")
_CONTROLS = ("select", "button", "input", "textarea")
_CODE = (*(tag for tag in mainblocks.UNSEEN if tag != "template"), *_CONTROLS)
_VISIBLE_TEXT = (
    "//body//text()[not(ancestor::script or ancestor::style or ancestor::noscript "
    "or ancestor::template)]"
)
# lxml.html's own lookup picks a class per tag name in Python, once for every element any code
# touches (trafilatura touches each several times): this one is lxml's C default, every element
# an `HtmlElement` (the tag-specific form classes add nothing Sift or trafilatura uses).
_HTML_CLASSES = lxml.etree.ElementDefaultClassLookup(
    element=lxml.html.HtmlElement,
    comment=lxml.html.HtmlComment,
    pi=lxml.html.HtmlProcessingInstruction,
    entity=lxml.html.HtmlEntity,
)
_BARE_URL = re.compile(r"https?://[^\s<>\"'`\\\])}]+")
_MD_LINK = re.compile(r"\[([^\]\n]{0,500})\]\(\s*<?([^()\s<>]{1,2000})>?(?:\s+\"[^\"\n]*\")?\s*\)")
_MD_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


@dataclass(frozen=True, slots=True)
class Rendered:
    title: str
    content: str
    metadata: dict[str, str | None] = field(default_factory=pagemeta.empty)
    verdict: str = "ok"  # docs/EXTRACTION.md §Verdicts


def render(
    kind: str,
    body: str | bytes,
    mode: str,
    url: str,
    *,
    links: bool = True,
    images: bool = True,
) -> Rendered:
    """The body of a response of `kind` (see `contenttype.classify`) rendered in `mode`.

    `links`/`images` false leave link targets/images out of `clean` and `markdown`. Raises
    InvalidTarget for an unknown mode; a page that only renders with scripts, a wall or a
    not-found page is rendered all the same and says so in `verdict` (the pipeline decides
    whether that fails the target). PDFs go through `sift.fetch.pdf.pdf_text` instead
    (ValueError here).
    """
    if mode not in MODES:
        raise InvalidTarget(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
    if kind == "pdf":
        raise ValueError("PDFs are rendered by sift.fetch.pdf.pdf_text")
    text = decode(body) if isinstance(body, bytes) else body
    if kind in ("html", "xhtml"):
        return _render_html(text, mode, url, links=links, images=images)
    found = verdict.body_verdict(text)
    if kind == "json":
        return Rendered("", _render_json(text, mode, url), verdict=found)
    if kind == "xml":
        xml = _render_xml(text, mode, url)
        return Rendered(xml.title, xml.content, verdict=found)
    if kind == "markdown":
        content = links_in_text(text, url, markdown=True) if mode == "links" else text
        m = _MD_HEADING.search(text[:20000])
        return Rendered(short_title(m.group(1)) if m else "", content, verdict=found)
    if kind == "text":
        return Rendered("", links_in_text(text, url) if mode == "links" else text, verdict=found)
    raise Unsupported(f"cannot render content of kind {kind!r}")


def render_body(
    kind: str,
    body: bytes,
    content_type: str,
    mode: str,
    url: str,
    links: bool = True,
    images: bool = True,
) -> Rendered:
    """`render` of a response body still in bytes, decoded by its header's charset first
    (positional arguments only: the render child passes them through as they are)."""
    text = contenttype.decode(body, content_type)
    return render(kind, text, mode, url, links=links, images=images)


# HTML


def _render_html(text: str, mode: str, url: str, *, links: bool, images: bool) -> Rendered:
    tree = _parse_html(text)
    if tree is None:
        return Rendered("", "" if mode != "raw" else text, verdict="empty")
    title, meta, bases = _title_and_metadata(tree, url)
    if mode in ("raw", "links", "markdown"):
        # No extraction in these modes: the page's visible text stands for its main content.
        seen = _verdict(" ".join("".join(tree.xpath(_VISIBLE_TEXT)).split()), text, tree, title)
        if mode == "markdown" and _script_only(tree):
            seen = "bot_wall"
        if mode == "raw":
            return Rendered(title, text, meta, seen)
        if mode == "links":
            return Rendered(title, html_links(tree, url), meta, seen)
        md = html_markdown(tree, url, links=links, images=images)
        return Rendered(title, md, meta, seen)
    # trafilatura chooses the main content from the parsed tree (it works on a copy, so the
    # tree stays as parsed, less the code it never reads: `_drop_code`). Only a short extract
    # can come from a script-only page, so the bot-wall check (a walk over all the page's
    # text) waits for one.
    scripted = _drop_code(tree)
    extracted = tidy(extract_main(tree, url, "txt") or "")
    seen = _verdict(extracted, text, tree, title)
    if len(extracted) < SHORT_EXTRACT:
        if _script_only(tree, scripted):
            seen = "bot_wall"
        if mode == "text":
            shown = _fallback_text(tree) or extracted
        else:
            # trafilatura's answer for short pages comes from a bare baseline without structure
            # and with whatever navigation sits nearby: semantic pruning reads these better.
            md = html_markdown(tree, url, drop=_DROP_FOR_FALLBACK, links=links, images=images)
            shown = md or extracted
        if seen == "empty" and shown.strip():
            seen = "thin"
        return Rendered(title, shown, meta, seen)
    if mode == "text":
        return Rendered(title, _with_exact_code(extracted, tree), meta, seen)
    base = htmlmd.base_url(tree, url, bases)
    main = mainblocks.main_tree(tree, extracted)  # already without unseen elements
    md = htmlmd.to_markdown(main, base, drop=(), links=links, images=images)
    return Rendered(title, md or extracted, meta, seen)


def _title_and_metadata(tree: lxml.html.HtmlElement, url: str) -> tuple[str, dict, list]:
    """The page's title, its metadata, and its `base` elements (`pagemeta.page_elements`
    gathers them in one walk). The other elements gathered are let go here rather than held
    through the extraction and the matching: every object alive then makes the garbage
    collector run more often."""
    found = pagemeta.page_elements(tree)
    title = html_title(tree, found["title"])
    return title, pagemeta.page_metadata(tree, url, title, found), found["base"]


def _verdict(main: str, text: str, tree: lxml.html.HtmlElement, title: str) -> str:
    """The page's verdict from its main content; the page's own words are read only when
    that is short (docs/EXTRACTION.md §Verdicts)."""
    if len(main) > verdict.WALL_MAX:
        return "ok"
    h1 = next(tree.iter("h1"), None)
    headline = f"{title} {h1.text_content() if h1 is not None else ''}".lower()
    return verdict.page_verdict(
        main, text[: verdict.SCAN_MAX].lower(), headline, lambda: _visible_chars(tree)
    )


def _visible_chars(tree: lxml.html.HtmlElement) -> int:
    """Characters of the page's text outside scripts, styles and templates, spaces left out."""
    return len("".join("".join(tree.xpath(_VISIBLE_TEXT)).split()))


def _drop_code(tree: lxml.html.HtmlElement) -> bool:
    """Drop what neither trafilatura nor Sift reads as the page's text before the extraction:
    the head's scripts and styles, and the body's `UNSEEN` elements (scripts, styles, frames,
    drawings) but `template`, which trafilatura unwraps, and its form controls; JSON scripts
    stay (JSON-LD is read by trafilatura's fallback and its forum check). Returns whether a
    script was dropped.

    trafilatura removes the same elements, but only after copying the whole tree several
    times and running its pruning paths over it; the matching strips the unseen ones right
    after. A page's inline code, icons and option lists are often most of its nodes and
    bytes (docs/EXTRACTION.md §Libraries, and why)."""
    scripted = False
    head = tree.find("head")
    if head is not None:
        for el in list(head.iter("script", "style")):
            if "json" not in (el.get("type") or "").lower():
                scripted = scripted or el.tag == "script"
                el.drop_tree()
    body = tree.find("body")
    if body is not None:
        for el in list(body.iter(*_CODE)):
            if el.tag == "script" and "json" in (el.get("type") or "").lower():
                continue
            scripted = scripted or el.tag == "script"
            el.drop_tree()
    return scripted


def _parse_html(text: str) -> lxml.html.HtmlElement | None:
    """Parse from UTF-8 bytes, so an XML declaration with an encoding cannot trip lxml."""
    if not text.strip():
        return None
    # No table of `id` attributes: nothing looks elements up by id, and every copy of the tree
    # (trafilatura makes several) would rebuild it.
    parser = lxml.etree.HTMLParser(encoding="utf-8", remove_comments=True, collect_ids=False)
    parser.set_element_class_lookup(_HTML_CLASSES)
    try:
        return lxml.html.document_fromstring(text.encode("utf-8", "replace"), parser=parser)
    except (lxml.etree.ParserError, ValueError):
        return None


def extract_main(doc: str | lxml.html.HtmlElement, url: str, fmt: str) -> str | None:
    """trafilatura's main-content extraction: recall-leaning, without comments or links."""
    return trafilatura.extract(
        doc,
        url=url or None,
        output_format=fmt,
        include_comments=False,
        include_tables=True,
        include_links=False,
        include_images=False,
        include_formatting=fmt == "markdown",
        favor_recall=True,
        deduplicate=False,
        with_metadata=False,
    )


def html_title(tree: lxml.html.HtmlElement, titles: list | None = None) -> str:
    """<title>, else og:title, else the first <h1>. `titles`: the page's `title` elements in
    document order, when the caller has them (`pagemeta.page_elements`)."""
    # A walk in C finds the titles (an XPath `//title` query costs as much as the rest of the
    # metadata on a large page); an SVG's <title> in the body counts, as it did in the query.
    if titles is None:
        titles = list(tree.iter("title"))
    found = short_title(" ".join(t for el in titles for t in el.itertext()))
    if found:
        return found
    for xp in ("//meta[@property='og:title']/@content", "(//h1)[1]//text()"):
        found = short_title(" ".join(str(t) for t in tree.xpath(xp)))
        if found:
            return found
    return ""


def _script_only(tree: lxml.html.HtmlElement, scripted: bool = False) -> bool:
    if not scripted and not tree.xpath("//script"):
        return False
    visible = "".join(tree.xpath(_VISIBLE_TEXT))
    return len("".join(visible.split())) < SCRIPT_ONLY_MAX_TEXT


def html_markdown(
    tree: lxml.html.HtmlElement,
    url: str,
    *,
    drop: tuple[str, ...] = _DROP_FOR_MARKDOWN,
    links: bool = True,
    images: bool = True,
) -> str:
    """The page as Markdown, with absolute links and without scripts, styles or inline data."""
    base = htmlmd.base_url(tree, url)
    return htmlmd.to_markdown(_copy(tree), base, drop=drop, links=links, images=images)


def _fallback_text(tree: lxml.html.HtmlElement) -> str:
    tree = _copy(tree)
    for el in list(tree.iter(*_DROP_FOR_FALLBACK)):
        el.drop_tree()
    body = tree.find("body")
    text = (body if body is not None else tree).text_content()
    return tidy("\n".join(line.strip() for line in text.splitlines()))


def _with_exact_code(text: str, tree: lxml.html.HtmlElement) -> str:
    """The extractor's text with each code block it holds put back with its own indentation
    and blank lines (the extractor and `tidy` flatten both). Lines are found through an index
    of the text's lines, and at most `CODE_BLOCKS_MAX` blocks and `CODE_TRIES` candidate places
    each are looked at, so the work stays linear whatever the page repeats."""
    if not text or tree.find(".//pre") is None:
        return text
    lines = text.split("\n")
    starts: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        starts.setdefault(line.strip(), []).append(i)
    for pre in itertools.islice(tree.iter("pre"), CODE_BLOCKS_MAX):
        code = pre.text_content().strip("\n").rstrip()
        wanted = [ln.strip() for ln in code.split("\n") if ln.strip()]
        if len(wanted) < 2:
            continue
        n = len(wanted)
        for i in starts.get(wanted[0], ())[:CODE_TRIES]:
            if [ln and ln.strip() for ln in lines[i : i + n]] == wanted:
                exact = "\n".join(ln.rstrip() for ln in code.split("\n"))
                lines[i : i + n] = [exact, *[None] * (n - 1)]
                break
    return "\n".join(ln for ln in lines if ln is not None)


def html_links(tree: lxml.html.HtmlElement, url: str) -> str:
    """`url text` per line: absolute (against <base> and the page URL), http(s) only, fragments
    and same-page anchors dropped, each URL once with the first non-empty text."""
    base = htmlmd.base_url(tree, url)
    found: dict[str, str] = {}
    for a in tree.iter("a", "area"):
        raw = (a.get("href") or "").strip()
        if not raw or raw.startswith("#"):
            continue
        try:
            href = _http_url(urljoin(base, raw) if base else raw)
        except ValueError:
            continue
        if href is None:
            continue
        text = " ".join(a.text_content().split())
        if not text:
            alts = a.xpath(".//img/@alt")
            text = " ".join((a.get("title") or a.get("aria-label") or " ".join(alts)).split())
        if not found.get(href):
            found[href] = short_title(text)
    return "\n".join(f"{href} {text}".rstrip() for href, text in found.items())


def links_in_text(text: str, url: str, *, markdown: bool = False) -> str:
    """Links of a non-HTML body: Markdown links (resolved against `url`) and bare URLs."""
    found: dict[str, str] = {}
    if markdown:
        for m in _MD_LINK.finditer(text):
            href = _http_url(urljoin(url, m.group(2)) if url else m.group(2))
            if href and not found.get(href):
                found[href] = short_title(" ".join(m.group(1).split()))
    for m in _BARE_URL.finditer(text):
        href = _http_url(m.group(0).rstrip(".,;:!?*_"))
        if href and href not in found:
            found[href] = ""
    return "\n".join(f"{href} {t}".rstrip() for href, t in found.items())


def _http_url(href: str | None) -> str | None:
    if not href:
        return None
    href = urldefrag(href.strip())[0]
    try:
        parts = urlsplit(href)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return href


# JSON and XML


def _render_json(text: str, mode: str, url: str) -> str:
    """clean: pretty-printed; markdown: pretty-printed in a json fence; text/raw: as received."""
    if mode == "links":
        return links_in_text(text, url)
    if mode in ("text", "raw"):
        return text
    try:
        value = orjson.loads(text)
        pretty = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    except orjson.JSONDecodeError:
        try:
            pretty = well_formed(json.dumps(json.loads(text), indent=2, ensure_ascii=False))
        except (ValueError, RecursionError):  # nested deeper than Python's stack: as received
            return text
    return f"```json\n{pretty}\n```" if mode == "markdown" else pretty


def _render_xml(text: str, mode: str, url: str) -> Rendered:
    """Feeds become Markdown (clean, markdown) or plain items (text); other XML its text."""
    if mode == "raw":
        return Rendered("", text)
    root = _parse_xml(text)
    if root is None:
        return Rendered("", links_in_text(text, url) if mode == "links" else text)
    feed = _feed(root, url)
    if feed is not None:
        title, items, description = feed
        if mode == "links":
            return Rendered(title, "\n".join(f"{i['link']} {i['title']}".rstrip() for i in items))
        return Rendered(title, _feed_text(title, description, items, markdown=mode != "text"))
    if mode == "links":
        return Rendered("", links_in_text(text, url))
    lines = (t.strip() for t in root.itertext())
    return Rendered("", "\n".join(t for t in lines if t))


def _parse_xml(text: str):
    parser = lxml.etree.XMLParser(
        resolve_entities=False, no_network=True, recover=True, huge_tree=False
    )
    try:
        root = lxml.etree.fromstring(text.encode("utf-8", "replace"), parser=parser)
    except (lxml.etree.XMLSyntaxError, ValueError):
        return None
    return root


def _local(el) -> str:
    tag = el.tag if isinstance(el.tag, str) else ""
    return tag.rsplit("}", 1)[-1].lower()


def _child_text(el, *names: str) -> str:
    for name in names:
        for child in el:
            if _local(child) == name:
                text = "".join(child.itertext()).strip()
                if text:
                    return text
    return ""


def _feed(root, url: str):
    """(title, items, description) of an RSS, RDF or Atom feed, or None for other XML."""
    kind = _local(root)
    if kind == "rss":
        channel = next((c for c in root if _local(c) == "channel"), root)
        entries = [el for el in channel if _local(el) == "item"]
    elif kind == "rdf":
        channel = next((c for c in root if _local(c) == "channel"), root)
        entries = [el for el in root if _local(el) == "item"]
    elif kind == "feed":
        channel = root
        entries = [el for el in root if _local(el) == "entry"]
    else:
        return None
    items = []
    for el in entries:
        link = _child_text(el, "link")
        if not link:
            alternates = [
                c.get("href")
                for c in el
                if _local(c) == "link" and c.get("rel", "alternate") == "alternate"
            ]
            link = next((h for h in alternates if h), "")
        if htmlmd.unsafe_target(link):
            link = ""
        items.append(
            {
                "title": short_title(" ".join(_child_text(el, "title").split())),
                "link": urljoin(url, link.strip()) if url and link else link.strip(),
                "date": _child_text(el, "pubdate", "published", "updated", "date"),
                "summary": _html_to_text(
                    _child_text(el, "description", "summary", "content", "encoded")
                ),
            }
        )
    title = short_title(" ".join(_child_text(channel, "title").split()))
    description = _html_to_text(_child_text(channel, "description", "subtitle"))
    return title, items, description


def _feed_text(title: str, description: str, items: list[dict], *, markdown: bool) -> str:
    if markdown:  # page text stays text (docs/SECURITY.md §Markdown output)
        title, description = htmlmd.escape_markup(title), htmlmd.escape_markup(description)
        items = [
            {**i, **{k: htmlmd.escape_markup(i[k]) for k in ("title", "date", "summary")}}
            for i in items
        ]
    out = []
    if title:
        out.append(f"# {title}" if markdown else title)
    if description:
        out.append(description)
    for item in items:
        name = item["title"] or item["link"] or "(untitled)"
        if markdown:
            head = f"## [{name}]({item['link']})" if item["link"] else f"## {name}"
            lines = [head]
        else:
            lines = [name] + ([item["link"]] if item["link"] else [])
        if item["date"]:
            lines.append(item["date"])
        block = "\n".join(lines)
        out.append(f"{block}\n\n{item['summary']}" if item["summary"] else block)
    return "\n\n".join(out)


def _html_to_text(s: str) -> str:
    if "<" in s:
        with contextlib.suppress(lxml.etree.ParserError, ValueError):
            s = lxml.html.fragment_fromstring(s, create_parent="div").text_content()
    s = " ".join(s.split())
    return s if len(s) <= FEED_SUMMARY_MAX else s[: FEED_SUMMARY_MAX - 1].rstrip() + "…"


# Shared


def short_title(s: str) -> str:
    s = " ".join(s.split())
    return s if len(s) <= TITLE_MAX else s[: TITLE_MAX - 1].rstrip() + "…"


def _copy(tree: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    return copy.deepcopy(tree)
