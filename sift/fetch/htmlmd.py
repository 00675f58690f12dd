"""HTML to Markdown for `markdown` (the whole page) and `clean` (the main content's own markup).

The converter is html-to-markdown (a compiled converter, about ten times faster than a
pure-Python one on the same input, see docs/EXTRACTION.md §Libraries, and why); this module
prepares the lxml tree for it so that both modes keep what an agent acts on:

* links and images absolute against `<base href>` and the page URL, `data:` images dropped;
  with `links=False` a link is its text, with `images=False` images go (captions stay);
* code blocks fenced with the language named by `language-x`, `lang-x` or `highlight-x` on the
  `pre`, its `code` or the element around it, their whitespace exact;
* definition lists as `**term**` with the definition indented under it;
* nothing a Markdown reader would run: a link or image whose target is `javascript:`,
  `vbscript:`, `data:` or `file:` (any case, whatever whitespace or entities hide it) loses
  that target, and page text that would read as markup (`<tag`, `](`) is escaped, outside code
  (docs/SECURITY.md §Markdown output).
"""

from __future__ import annotations

import re
from dataclasses import replace
from urllib.parse import urljoin, urlsplit

import html_to_markdown
import html_to_markdown.api
import lxml.etree
import lxml.html

from sift.fetch.mainblocks import UNSEEN, text_of

DROP = ("head", *UNSEEN)  # elements whose content is not the page's text
# The descendant axis, not `.//`: one pass instead of a node set per node (see pagemeta).
_DATA_IMAGES = lxml.etree.XPath("descendant::img[starts-with(normalize-space(@src), 'data:')]")
_BRACKETED_LINKS = lxml.etree.XPath("descendant::a[@href][contains(., '[') or contains(., ']')]")
_OPEN, _CLOSE = "\ue05b", "\ue05d"  # brackets of link text, parked in the private-use area
_XML_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_DOT = "\ue02e"  # the dot of a number that starts a line of a paragraph, parked likewise
_NUMBERED = re.compile(r"^(\s*\d{1,9})\.(?=\s)")
# Somewhere in a text that `_NUMBERED` matches; led by the dot, which the regex engine scans for
# fast (led by `\d`, it tries the pattern at every character: ten times slower).
_NUMBER_DOT = re.compile(r"\.(?<=\d\.)\s")
# Where a line of running text starts: blocks that are not list items, and line breaks.
_LINE_STARTS = ("p", "div", "td", "th", "dd", "blockquote", "section", "article", "br")
_LANG_CLASS = re.compile(r"(?:^|\s)(?:language|lang|highlight)-([\w+#.-]{1,30})")
_PLACEHOLDER = "SIFTDEFLIST{}X"
_PLACEHOLDER_LINE = re.compile(r"^(.*?)SIFTDEFLIST(\d+)X[ \t]*", re.M)
_LINE_PREFIX = re.compile(r"^[ \t>]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)?$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s")
_LIST_MARK = re.compile(r"[-*+]|\d{1,9}[.)]")
UNSAFE_SCHEMES = ("javascript:", "vbscript:", "data:", "file:")
_URL_NOISE = re.compile(r"[\x00-\x20\x7f]+")  # what browsers skip inside a URL's scheme
_MARKUP = re.compile(r"<(?=[A-Za-z/!?])|\]\(")  # an HTML tag or comment, a link's middle
_CODE = frozenset(("pre", "code", "kbd", "samp", "tt"))
# Page text that would read as markup is marked with these (no page has a reason to hold them,
# and one that does only gets an escape) and escaped after the conversion, which would
# otherwise escape the escape.
_LT, _LINK = "\ufdd0", "\ufdd1"
_MARKED = lxml.etree.XPath("descendant::text()[contains(., '<') or contains(., '](')]")
# Every link or embed target the converter writes out (`href`; `src` of img, video, audio,
# iframe): only one that starts with neither `h` nor `/` nor `#` can name an unsafe scheme.
_TARGETS = lxml.etree.XPath(
    "descendant::*/@href[not(starts-with(., 'h') or starts-with(., '/') or starts-with(., '#'))]"
    " | descendant::*/@src[not(starts-with(., 'h') or starts-with(., '/'))]"
)

# The converter's full path straight away: its default first tries a byte scanner that gives up
# on most pages' markup and starts over (the full path is the reference the scanner is tested
# against), and image sizes are read for metadata Sift does not ask for.
_FAST = {"tier_strategy": "tier2", "infer_dimensions": False}
_OPTIONS = html_to_markdown.ConversionOptions(
    heading_style="atx",
    bullets="-",
    escape_misc=False,
    escape_asterisks=False,
    escape_underscores=False,
    compact_tables=True,
    autolinks=False,
    extract_metadata=False,
    preprocessing=html_to_markdown.PreprocessingOptions(enabled=False),
    **_FAST,
)
_INLINE = html_to_markdown.ConversionOptions(
    escape_misc=False,
    autolinks=False,
    extract_metadata=False,
    convert_as_inline=True,
    preprocessing=html_to_markdown.PreprocessingOptions(enabled=False),
    **_FAST,
)


def to_markdown(
    root: lxml.html.HtmlElement,
    base: str,
    *,
    drop: tuple[str, ...] = DROP,
    links: bool = True,
    images: bool = True,
) -> str:
    """`root` (changed in place: pass a tree nobody else reads) as tidy Markdown, links and
    images resolved against `base` (see `base_url`)."""
    if drop:
        for el in list(root.iter(*drop)):  # one pass over the tree for all the names
            el.drop_tree()
    if images:
        for img in _DATA_IMAGES(root):
            img.drop_tree()
    else:
        for img in root.xpath(".//img|.//picture|.//source"):
            img.drop_tree()
    if not links:
        lxml.etree.strip_tags(root, "a")
        parked = False
    else:
        parked = _park_link_brackets(root)
    _drop_unsafe_targets(root)
    # Both passes below look for rare text; the tree's text read whole (one serialisation in C)
    # and searched for a fixed string tells whether it holds any, and most pages skip both walks.
    text = text_of(root)
    marked = _mark_markup(root) if "<" in text or "](" in text else False
    numbered = _park_line_numbers(root) if marked or _NUMBER_DOT.search(text) else False
    base = _usable_base(base)
    _mark_code_languages(root)
    deflists = _park_definition_lists(root, base)
    html = lxml.html.tostring(root, encoding="unicode")
    md = tidy(_convert(html, _OPTIONS, base))
    if deflists:
        md = _PLACEHOLDER_LINE.sub(lambda m: _unpark(deflists[int(m.group(2))], m.group(1)), md)
        md = re.sub(r"\n{3,}", "\n\n", md).strip()
    if marked:
        md = md.replace(_LT, "\\<").replace(_LINK, "\\](")
    if parked:
        md = md.replace(_OPEN, "\\[").replace(_CLOSE, "\\]")
    if numbered:
        md = md.replace(_DOT, "\\.")
    return md


def unsafe_target(url: str) -> bool:
    """A link or image target that runs something or reads the reader's files when followed."""
    return _URL_NOISE.sub("", url[:64]).lower().startswith(UNSAFE_SCHEMES)


def escape_markup(text: str) -> str:
    """Page text for a Markdown line: `<tag` and `](` escaped so they stay text."""
    return _MARKUP.sub(lambda m: "\\" + m.group(), text)


def _drop_unsafe_targets(root) -> None:
    """A link keeps its text without the target; an image or embed goes."""
    for value in _TARGETS(root):
        el = value.getparent()
        if el is None or not unsafe_target(value):
            continue
        if value.attrname == "href":
            del el.attrib["href"]
        elif el.getparent() is not None:
            el.drop_tree()


def _mark_markup(root) -> bool:
    """Mark page text outside code that would read as markup; whether any was."""
    marked = False
    for text in _MARKED(root):
        owner = text.getparent()
        if owner is None:
            continue
        inside = owner if text.is_text else owner.getparent()
        if inside is not None and (
            inside.tag in _CODE or any(a.tag in _CODE for a in inside.iterancestors())
        ):
            continue
        value = _MARKUP.sub(lambda m: _LT if m.group() == "<" else _LINK, str(text))
        if value == text:
            continue
        if text.is_text:
            owner.text = _xml_safe(value)
        else:
            owner.tail = _xml_safe(value)
        marked = True
    return marked


def _xml_safe(text: str) -> str:
    """`text` without the control characters lxml refuses to set (the parser kept them from
    the page; the Markdown would not show them either)."""
    return _XML_UNSAFE.sub("", text)


def _park_line_numbers(root) -> bool:
    """Escape the dot of a number that starts a line of running text ("2. Where…" after a
    line break): bare, Markdown reads the line as an item of a numbered list, and a reader
    that renders it drops the number the page wrote."""
    found = False
    for el in root.iter(*_LINE_STARTS):
        if el.tag == "br":
            text = el.tail
            if text and _NUMBERED.match(text):
                el.tail = _xml_safe(_NUMBERED.sub(lambda m: m.group(1) + _DOT, text, 1))
                found = True
        else:
            text = el.text
            if text and _NUMBERED.match(text):
                el.text = _xml_safe(_NUMBERED.sub(lambda m: m.group(1) + _DOT, text, 1))
                found = True
    return found


def _park_link_brackets(root) -> bool:
    """Put brackets in link text where the converter leaves them alone, to come back escaped:
    `[\\[Smith '20\\]](url)`. Left bare, `[[Smith '20]](url)` is a link only to a reader that
    balances brackets; simpler ones show the URL as text."""
    found = False
    for a in _BRACKETED_LINKS(root):
        for el in a.iter():
            if el.text:
                el.text = _xml_safe(el.text.replace("[", _OPEN).replace("]", _CLOSE))
            if el is not a and el.tail:
                el.tail = _xml_safe(el.tail.replace("[", _OPEN).replace("]", _CLOSE))
        found = True
    return found


def base_url(tree: lxml.html.HtmlElement, url: str, bases: list | None = None) -> str:
    """What relative links resolve against: `<base href>` (itself resolved against the page
    URL), else the page URL. `bases`: the page's `base` elements in document order, when the
    caller has them. (A walk in C: an XPath `//base` costs several times more.)"""
    for base in tree.iter("base") if bases is None else bases:
        href = base.get("href")
        if href is not None:
            return urljoin(url, href.strip()) if url else href.strip()
    return url


def _native_fields(options: html_to_markdown.ConversionOptions) -> dict | None:
    """`options` as the compiled converter's own option fields, or None where this version of
    the package does not expose them (then `_convert` takes the public way)."""
    try:
        built = html_to_markdown.api._to_rust_conversion_options(options)
        fields = {
            name: getattr(built, name)
            for name in dir(built)
            if not name.startswith("_") and not callable(getattr(built, name))
        }
        fields.pop("base_url")
        type(built)(**fields, base_url=None)
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return fields


# The public `convert` rebuilds the compiled converter's options from the dataclass on every
# call (about 0.1 ms, and a page's own `base_url` costs a dataclass copy on top): built once
# here, each call only adds its `base_url`.
_NATIVE = {id(o): _native_fields(o) for o in (_OPTIONS, _INLINE)}


def _usable_base(base: str) -> str | None:
    """`base` when the converter can resolve relative URLs against it (it does so itself, far
    faster than rewriting the tree), else None."""
    if not base:
        return None
    try:
        parts = urlsplit(base)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return base


def _convert(html: str, options: html_to_markdown.ConversionOptions, base: str | None) -> str:
    """`html_to_markdown.convert(html, replace(options, base_url=base)).content`."""
    fields = _NATIVE[id(options)]
    if fields is None:
        opts = replace(options, base_url=base) if base else options
        return html_to_markdown.convert(html, opts).content
    native = html_to_markdown.api._rust
    return native.convert(
        html=html, options=native.ConversionOptions(**fields, base_url=base), visitor=None
    ).content


def tidy(md: str) -> str:
    """Normalise Markdown: no stray indentation (it would read as code), no runs of blank
    lines, a blank line around code fences; code inside fences is left alone."""
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


def _mark_code_languages(root) -> None:
    """Put the language a code block names anywhere near it where the converter reads it."""
    for pre in root.iter("pre"):
        code = pre.find("code")
        lang = ""
        for node in (code, pre, pre.getparent()):
            if node is not None:
                m = _LANG_CLASS.search(node.get("class") or "")
                if m:
                    lang = m.group(1)
                    break
        if lang:
            (code if code is not None else pre).set("class", f"language-{lang}")


def _park_definition_lists(root, base: str | None) -> list[str]:
    """Render each outermost `<dl>` here and leave a placeholder paragraph in its place."""
    out: list[str] = []
    for dl in list(root.iter("dl")):
        if dl.getparent() is None or any(a.tag == "dl" for a in dl.iterancestors()):
            continue
        out.append(_definition_list(dl, base))
        holder = lxml.html.Element("p")
        holder.text = _PLACEHOLDER.format(len(out) - 1)
        holder.tail = dl.tail
        dl.getparent().replace(dl, holder)
    return out


def _definition_list(dl, base: str | None) -> str:
    blocks: list[str] = []
    for child in dl.iter("dt", "dd"):
        if any(a is not dl and a.tag == "dl" for a in child.iterancestors()):
            continue  # nested lists render inside their definition
        html = lxml.html.tostring(child, encoding="unicode", with_tail=False)
        if child.tag == "dt":
            term = _convert(html, _INLINE, base).strip()
            if term:
                blocks.append(f"**{term}**")
        else:
            body = _convert(html, _OPTIONS, base).strip()
            lines = [("    " + ln) if ln.strip() else "" for ln in body.splitlines()]
            if lines and blocks:
                blocks[-1] += "\n" + "\n".join(lines)
            elif lines:
                blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _unpark(block: str, prefix: str) -> str:
    """`block` under the line prefix its placeholder had (a quote mark, a list indent), or on
    lines of its own when the placeholder sat in running text."""
    if not _LINE_PREFIX.match(prefix):
        return f"{prefix.rstrip()}\n\n{block}\n\n"
    if not prefix:
        return block + "\n"
    cont = _LIST_MARK.sub(lambda m: " " * len(m.group(0)), prefix)
    lines = block.split("\n")
    return "\n".join([prefix + lines[0], *((cont + ln).rstrip() for ln in lines[1:])])
