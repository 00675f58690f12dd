"""Turn a decoded response body into what the caller asked for: one function per mode.

`clean` is the main content as Markdown (trafilatura, which leads the open-source extractors on
public benchmarks, see docs/EXTRACTION.md); `markdown` is the whole page as Markdown
(markdownify); `text` is the main content as plain text; `raw` is the body as received; `links`
lists the page's absolute http(s) links. JSON, XML feeds, Markdown and plain text get the
closest sensible reading of each mode. PDFs are not rendered here: see `sift.fetch.pdf`.

Everything is synchronous and CPU-bound; callers run it off the event loop.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
from dataclasses import dataclass
from urllib.parse import urldefrag, urljoin, urlsplit

import lxml.etree
import lxml.html
import markdownify
import orjson
import trafilatura

from sift.errors import BotWall, InvalidTarget, Unsupported
from sift.fetch.contenttype import decode
from sift.fetch.target import MODES

# A page whose visible text is shorter than this and that runs scripts is an app shell.
SCRIPT_ONLY_MAX_TEXT = 64
TITLE_MAX = 300
SHORT_EXTRACT = 250  # below this, trafilatura has fallen back to its baseline
FEED_SUMMARY_MAX = 1000

_DROP_FOR_MARKDOWN = (
    "//head|//script|//style|//noscript|//template|//svg|//iframe|//object|//embed|//canvas"
)
_DROP_FOR_FALLBACK = _DROP_FOR_MARKDOWN + "|//nav|//header|//footer|//aside|//form|//button"
_VISIBLE_TEXT = (
    "//body//text()[not(ancestor::script or ancestor::style or ancestor::noscript "
    "or ancestor::template)]"
)
_BARE_URL = re.compile(r"https?://[^\s<>\"'`\\\])}]+")
_MD_LINK = re.compile(r"\[([^\]\n]{0,500})\]\(\s*<?([^()\s<>]{1,2000})>?(?:\s+\"[^\"\n]*\")?\s*\)")
_MD_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s")
_LANG_CLASS = re.compile(r"(?:^|\s)(?:language|lang|highlight)-([\w+#.-]{1,30})")


@dataclass(frozen=True, slots=True)
class Rendered:
    title: str
    content: str


def render(kind: str, body: str | bytes, mode: str, url: str) -> Rendered:
    """The body of a response of `kind` (see `contenttype.classify`) rendered in `mode`.

    Raises InvalidTarget for an unknown mode and BotWall for a page that only renders with
    scripts; PDFs go through `sift.fetch.pdf.pdf_text` instead (ValueError here).
    """
    if mode not in MODES:
        raise InvalidTarget(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
    if kind == "pdf":
        raise ValueError("PDFs are rendered by sift.fetch.pdf.pdf_text")
    text = decode(body) if isinstance(body, bytes) else body
    if kind in ("html", "xhtml"):
        return _render_html(text, mode, url)
    if kind == "json":
        return Rendered("", _render_json(text, mode, url))
    if kind == "xml":
        return _render_xml(text, mode, url)
    if kind == "markdown":
        content = links_in_text(text, url, markdown=True) if mode == "links" else text
        m = _MD_HEADING.search(text[:20000])
        return Rendered(short_title(m.group(1)) if m else "", content)
    if kind == "text":
        return Rendered("", links_in_text(text, url) if mode == "links" else text)
    raise Unsupported(f"cannot render content of kind {kind!r}")


# HTML


def _render_html(text: str, mode: str, url: str) -> Rendered:
    tree = _parse_html(text)
    if tree is None:
        return Rendered("", "" if mode != "raw" else text)
    title = html_title(tree)
    if mode == "raw":
        return Rendered(title, text)
    if mode == "links":
        return Rendered(title, html_links(tree, url))
    if mode == "markdown":
        _refuse_script_only(tree)
        return Rendered(title, html_markdown(tree, url))
    # trafilatura takes the parsed tree rather than parsing the text a second time. Only a
    # short extract can come from a script-only page, so the bot-wall check (a walk over all
    # the page's text) waits for one; it and the short-page fallbacks use a fresh tree, since
    # trafilatura may change the one it is given.
    fmt = "txt" if mode == "text" else "markdown"
    out = tidy(extract_main(tree, url, fmt) or "")
    if len(out) >= SHORT_EXTRACT:
        return Rendered(title, out)
    fresh = _reparsed(text, tree)
    _refuse_script_only(fresh)
    if mode == "text":
        return Rendered(title, _fallback_text(fresh) or out)
    # trafilatura's answer for short pages comes from a bare baseline without structure and
    # with whatever navigation sits nearby: semantic pruning reads these better.
    return Rendered(title, html_markdown(fresh, url, drop=_DROP_FOR_FALLBACK) or out)


def _refuse_script_only(tree: lxml.html.HtmlElement) -> None:
    if _script_only(tree):
        raise BotWall("the page shows its content only through scripts; it needs a real browser")


def _reparsed(text: str, tree: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    """A fresh tree of a page whose first tree went to trafilatura."""
    fresh = _parse_html(text)
    return fresh if fresh is not None else tree


def _parse_html(text: str) -> lxml.html.HtmlElement | None:
    """Parse from UTF-8 bytes, so an XML declaration with an encoding cannot trip lxml."""
    if not text.strip():
        return None
    parser = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True)
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


def html_title(tree: lxml.html.HtmlElement) -> str:
    """<title>, else og:title, else the first <h1>."""
    for xp in ("//title//text()", "//meta[@property='og:title']/@content", "(//h1)[1]//text()"):
        found = short_title(" ".join(str(t) for t in tree.xpath(xp)))
        if found:
            return found
    return ""


def _script_only(tree: lxml.html.HtmlElement) -> bool:
    if not tree.xpath("//script"):
        return False
    visible = "".join(tree.xpath(_VISIBLE_TEXT))
    return len("".join(visible.split())) < SCRIPT_ONLY_MAX_TEXT


def html_markdown(tree: lxml.html.HtmlElement, url: str, *, drop: str = _DROP_FOR_MARKDOWN) -> str:
    """The page as Markdown, with absolute links and without scripts, styles or inline data."""
    tree = _copy(tree)
    for el in tree.xpath(drop):
        el.drop_tree()
    for img in tree.xpath("//img[starts-with(normalize-space(@src), 'data:')]"):
        img.drop_tree()
    if url:
        tree.make_links_absolute(url, resolve_base_href=True, handle_failures="discard")
    html = lxml.html.tostring(tree, encoding="unicode")
    md = markdownify.markdownify(
        html,
        heading_style="ATX",
        bullets="-",
        code_language_callback=_code_language,
        bs4_options="lxml",
        escape_misc=False,
    )
    return tidy(md)


def _fallback_text(tree: lxml.html.HtmlElement) -> str:
    tree = _copy(tree)
    for el in tree.xpath(_DROP_FOR_FALLBACK):
        el.drop_tree()
    body = tree.find("body")
    text = (body if body is not None else tree).text_content()
    return tidy("\n".join(line.strip() for line in text.splitlines()))


def _code_language(el) -> str:
    for node in (el, el.find("code")):
        if node is not None:
            m = _LANG_CLASS.search(" ".join(node.get("class") or []))
            if m:
                return m.group(1)
    return ""


def html_links(tree: lxml.html.HtmlElement, url: str) -> str:
    """`url text` per line: absolute (against <base> and the page URL), http(s) only, fragments
    and same-page anchors dropped, each URL once with the first non-empty text."""
    base = url
    for href in tree.xpath("//base/@href"):
        base = urljoin(url, href.strip()) if url else href.strip()
        break
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
            pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
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


def tidy(md: str) -> str:
    """Normalise extractor output: no stray indentation (it would read as code), no runs of
    blank lines, a blank line around code fences; code inside fences is left alone."""
    out: list[str] = []
    in_fence = False
    for raw_line in md.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = raw_line.rstrip()
        fence = line.lstrip().startswith(("```", "~~~"))
        if in_fence:
            out.append(line)
            if fence:
                in_fence = False
                out.append("")
            continue
        if fence:
            if out and out[-1]:
                out.append("")
            out.append(line.lstrip())
            in_fence = True
            continue
        if not _LIST_ITEM.match(line):
            line = line.lstrip()
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    return "\n".join(out).strip()


def short_title(s: str) -> str:
    s = " ".join(s.split())
    return s if len(s) <= TITLE_MAX else s[: TITLE_MAX - 1].rstrip() + "…"


def _copy(tree: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    return copy.deepcopy(tree)
