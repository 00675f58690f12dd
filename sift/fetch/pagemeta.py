"""What an HTML page says about itself: title, description, author, date, language, site, URL.

Read from the page's `<meta>` and `<link>` tags, its JSON-LD (schema.org) blocks, its microdata
and `<time>` elements and the byline it shows under its heading, never guessed from the body's
text or the URL: a field the page does not state is None (docs/EXTRACTION.md §Page metadata).
"""

from __future__ import annotations

import re
from datetime import date, datetime
from urllib.parse import urljoin, urlsplit

import lxml.etree
import orjson

FIELDS = ("title", "description", "author", "published", "language", "site_name", "canonical_url")
FIELD_MAX = 300
DESCRIPTION_MAX = 1000
JSON_LD_MAX = 200_000  # characters of one JSON-LD block; a larger one is skipped
JSON_LD_BLOCKS = 16
_NODES_MAX = 500  # JSON-LD objects looked at per page
_LANG = re.compile(r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$")
# One pass along the descendant (or attribute) axis: `//*[@a="v"]` makes libxml2 gather a node
# set per node of the page first, about seven times slower for the same answer.
_ITEMPROP_TIME = lxml.etree.XPath("/descendant::*/@itemprop[.='datePublished']/../@datetime")
# The elements the fields are read from, and the title and `<base>` the render reads too.
_READ_TAGS = ("meta", "script", "time", "link", "title", "base")
_ARTICLE = re.compile(r"Article|Posting|Report|WebPage|NewsArticle|Blog|Question", re.I)
_PERSON = re.compile(r"Person", re.I)
# Elements that name an author on the page (microdata, rel=author, the class names bylines and
# forum posts use) or hold its date (a class naming a date, a publication, a byline, an author):
# one look for both (`_marked`), the Python work on matches only.
_MARKED_CLASS = re.compile("author|byline|username|date|Date|publish")
_AUTHOR_CLASS = re.compile(r"author|byline|username")
_DATE_CLASS = re.compile(r"date|Date|publish|byline|author")
_NOT_A_BYLINE = re.compile(
    r"avatar|image|img|photo|bio|desc|comment|reply|about|more|list|link", re.I
)
_BY = re.compile(
    r"^(?:(?:written|posted|published|edited|reviewed|words)\s+)?by\b[:\s]*|^author[:\s]+", re.I
)
_NAME_END = re.compile(
    r"\s*(?:[|•·,;(]|\s-\s|\s–\s|\bon\b|\bupdated\b|\d{1,2}[/.]\d|\n).*", re.S | re.I
)
_MONTHS = {
    m: i
    for i, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        1,
    )
    for m in names
}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
# Text runs together where elements meet ("December 15, 2025Share"): a year ends at a non-digit.
_SHOWN_DATE = re.compile(
    r"(?<!\d)(\d{4})([-./])(\d{2})\2(\d{2})(?!\d)"
    rf"|\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})(?!\d)"
    rf"|(?<!\d)(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})(?!\d)"
    r"|(?<![\d.])(\d{1,2})([-/.])(\d{1,2})\12(\d{4})(?!\d)",  # day and month told apart only
    re.I,
)
# Every form above holds a year: a text without four digits in a row is passed over at a tenth of
# the cost of trying each form at each of its characters.
_YEAR = re.compile(r"\d{4}")
MARKED_MAX = 200  # byline elements looked at
MARKED_CHILDREN = 12  # children of a byline element at most (its text is read whole)
DATE_NODE_CHARS = 120  # an element holding a date says little else
_DAY = re.compile(rf"\b{_MONTH}\s+\d|\b(?:mon|tue|wed|thu|fri|sat|sun)\b", re.I)
BYLINE_CHARS = 400  # characters of text after the first heading read as its byline
AROUND_HEADING = 4  # levels above the first heading that hold its byline
_UPDATED = re.compile(r"updat|modif|edit", re.I)

_META = {
    "title": ("og:title", "twitter:title", "dc.title"),
    "description": ("description", "og:description", "twitter:description", "dc.description"),
    "author": ("author", "article:author", "dc.creator", "parsely-author", "sailthru.author"),
    "published": (
        "article:published_time",
        "og:published_time",
        "datepublished",
        "dc.date.issued",
        "dc.date",
        "date",
        "pubdate",
        "publishdate",
        "parsely-pub-date",
        "sailthru.date",
    ),
    "site_name": ("og:site_name", "application-name"),
    "language": ("og:locale", "content-language", "dc.language", "language"),
}


def empty() -> dict[str, str | None]:
    return dict.fromkeys(FIELDS)


def page_elements(tree) -> dict[str, list]:
    """The page's `meta`, `script`, `time`, `link`, `title` and `base` elements by tag, in
    document order: one walk in C for every element the fields read (a walk or an XPath query
    per field costs several times more), and for the render's title and base URL."""
    found: dict[str, list] = {tag: [] for tag in _READ_TAGS}
    for el in tree.iter(*_READ_TAGS):
        found[el.tag].append(el)
    return found


def page_metadata(
    tree, url: str, title: str = "", found: dict[str, list] | None = None
) -> dict[str, str | None]:
    """The seven fields for a parsed page (each None when the page does not state it);
    `found` is `page_elements(tree)` when the caller has it already."""
    if found is None:
        found = page_elements(tree)
    meta = _meta_tags(found["meta"])
    ld = _json_ld(found["script"])
    out = empty()
    out["title"] = _short(meta.get("title") or ld.get("title") or title)
    out["description"] = _short(meta.get("description") or ld.get("description"), DESCRIPTION_MAX)
    author = meta.get("author")
    if author and _looks_like_url(author):
        author = None
    marked: list | None = None  # the page's byline elements, looked up once if a field needs them
    byline = None
    if not author and not ld.get("person"):
        marked = _in_scopes(tree)
        byline = _byline_author(marked)
    out["author"] = _short(author or ld.get("person") or byline or ld.get("author"))
    out["published"] = (
        _date(ld.get("published"))
        or _date(meta.get("published"))
        or _time_tag(tree, found["time"])
        or _shown_date(tree, _in_scopes(tree) if marked is None else marked)
    )
    out["language"] = _language(tree, meta, ld)
    out["site_name"] = _short(meta.get("site_name") or ld.get("site_name"))
    out["canonical_url"] = _canonical(found["link"], url, meta)
    return out


def _meta_tags(metas: list) -> dict[str, str]:
    """First non-empty value per field, in the order of `_META`'s names."""
    found: dict[str, str] = {}
    for el in metas:
        key = (
            el.get("property") or el.get("name") or el.get("itemprop") or el.get("http-equiv") or ""
        )
        key = key.strip().lower()
        value = (el.get("content") or "").strip()
        if key and value and key not in found:
            found[key] = value
    out: dict[str, str] = {}
    for field, names in _META.items():
        for name in names:
            if found.get(name):
                out[field] = found[name]
                break
    if "og:url" in found:
        out["og:url"] = found["og:url"]
    return out


def _json_ld(scripts: list) -> dict[str, str]:
    """Fields from the page's schema.org JSON-LD, the article-like object preferred."""
    nodes: list[dict] = []
    blocks = (el for el in scripts if el.get("type") == "application/ld+json")
    for i, script in enumerate(blocks):
        text = script.text or ""
        if i >= JSON_LD_BLOCKS:
            break
        if len(text) > JSON_LD_MAX:
            continue
        try:
            _collect(orjson.loads(text), nodes)
        except orjson.JSONDecodeError:
            continue
    nodes.sort(key=lambda n: not _ARTICLE.search(str(n.get("@type", ""))))
    out: dict[str, str] = {}
    for node in nodes:
        for field, key in (
            ("title", "headline"),
            ("description", "description"),
            ("published", "datePublished"),
            ("language", "inLanguage"),
        ):
            v = node.get(key)
            if field not in out and isinstance(v, str) and v.strip():
                out[field] = v.strip()
        if "author" not in out:
            names = _names(node.get("author"))
            if names:
                out["author"] = "; ".join(names)
                if _is_person(node.get("author")):
                    out["person"] = out["author"]
        if "site_name" not in out:
            names = _names(node.get("publisher"))
            if names:
                out["site_name"] = names[0]
    return out


def _collect(value, nodes: list[dict]) -> None:
    """Every typed object, nested ones included (a question page's `mainEntity`), depth first,
    up to `_NODES_MAX` looked at."""
    stack = [value]
    seen = 0
    while stack and seen < 4 * _NODES_MAX and len(nodes) < _NODES_MAX:
        v = stack.pop()
        seen += 1
        if isinstance(v, list):
            stack.extend(reversed(v))
        elif isinstance(v, dict):
            if "@type" in v:
                nodes.append(v)
            stack.extend(
                reversed([x for k, x in v.items() if isinstance(x, (dict, list)) and k != "author"])
            )


def _is_person(value) -> bool:
    items = value if isinstance(value, list) else [value]
    return any(
        isinstance(i, dict) and _PERSON.search(str(i.get("@type", ""))) for i in items
    ) or any(isinstance(i, str) for i in items)


def _names(value) -> list[str]:
    items = value if isinstance(value, list) else [value]
    names = []
    for item in items[:20]:
        name = item.get("name") if isinstance(item, dict) else item
        if isinstance(name, str) and name.strip() and not _looks_like_url(name):
            names.append(" ".join(name.split()))
    return names


def _date(value: str | None) -> str | None:
    """RFC 3339: the date-time with its offset when the page gives both, else the date."""
    if not value:
        return None
    value = value.strip()
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        try:
            return date.fromisoformat(value[:10]).isoformat()
        except ValueError:
            return _read_date(value) if len(value) <= 40 else None
    if when.tzinfo is None:
        return when.date().isoformat()
    return when.isoformat().replace("+00:00", "Z")


def _time_tag(tree, times: list) -> str | None:
    """A `<time pubdate>`, an `itemprop=datePublished` one, one whose class says published, else
    the first `<time datetime>` of the article that is not an update's or a comment's."""
    for el in times:
        if el.get("pubdate") is not None:
            v = el.get("datetime")
            if v is not None:
                return _date(v)
    for v in _ITEMPROP_TIME(tree)[:1]:
        return _date(str(v))
    first = None
    for el in times:
        v = el.get("datetime")
        if not v:
            continue
        cls = el.get("class") or ""
        if "publish" in cls or "entry-date" in cls:
            return _date(v)
        if first is None and not _UPDATED.search(cls) and _in_article(el):
            first = v
    return _date(first) if first else None


def _in_article(el) -> bool:
    """Inside an `article` or `main` and not inside a comment or reply block."""
    inside = False
    for up in el.iterancestors():
        if _NOT_A_BYLINE.search(up.get("class") or "") and "comment" in (up.get("class") or ""):
            return False
        if up.tag in ("article", "main"):
            inside = True
    return inside


def _after_heading(tree) -> str:
    """The text right after the page's first `<h1>` (where a byline sits), up to
    `BYLINE_CHARS` characters, read from its following siblings and its parents' ones."""
    h1 = next(tree.iter("h1"), None)
    if h1 is None:
        return ""
    parts: list[str] = []
    size = 0
    el = h1
    for _ in range(3):
        for sib in el.itersiblings():
            if not isinstance(sib.tag, str) or sib.tag in ("script", "style", "h1", "h2"):
                if isinstance(sib.tag, str) and sib.tag in ("h1", "h2"):
                    return " ".join(parts)
                continue
            text = lxml.etree.tostring(sib, method="text", encoding="unicode", with_tail=False)
            parts.append(text)
            size += len(text)
            if size >= BYLINE_CHARS:
                return " ".join(parts)[:BYLINE_CHARS]
        el = el.getparent()
        if el is None or el.tag == "body":
            break
    return " ".join(parts)


def _shown_date(tree, marked: list) -> str | None:
    """A date the page shows ("December 15, 2025", "15 Dec 2025", "2025-12-15"): in the first
    short element whose class says it holds the date (not an update's, not in a comment, a
    sidebar or a footer), else in the byline under the first heading."""
    for el in marked[:MARKED_MAX]:
        cls = el.get("class") or ""
        if len(el) > MARKED_CHILDREN or not _DATE_CLASS.search(cls) or _UPDATED.search(cls):
            continue
        text = _text(el)
        if len(text) > DATE_NODE_CHARS or not _outside_comments(el):
            continue
        found = _read_date(text)
        if found:
            return found
    return _read_date(_after_heading(tree))


def _read_date(text: str) -> str | None:
    m = _SHOWN_DATE.search(text) if _YEAR.search(text) else None
    if m is None:
        return None
    g = m.groups()
    try:
        if g[0]:
            when = date(int(g[0]), int(g[2]), int(g[3]))
        elif g[4]:
            when = date(int(g[6]), _MONTHS[g[4].lower()], int(g[5]))
        elif g[7]:
            when = date(int(g[9]), _MONTHS[g[8].lower()], int(g[7]))
        else:
            # 11-29-2024 or 15/12/2025: a date only when one of the two cannot be a month.
            a, b = int(g[10]), int(g[12])
            if (a > 12) == (b > 12):
                return None
            day, month = (a, b) if a > 12 else (b, a)
            when = date(int(g[13]), month, day)
    except (ValueError, KeyError):
        return None
    return when.isoformat()


def _outside_comments(el) -> bool:
    return not any(
        "comment" in (up.get("class") or "") or up.tag in ("aside", "footer", "nav")
        for up in el.iterancestors()
    )


def _scopes(tree) -> list:
    """Where a byline is looked for: the block around the first `<h1>` (`AROUND_HEADING`
    levels up) and the first `article`, else the `main` element. A query over the whole page
    costs milliseconds on a large one; these hold the byline on the pages that have one."""
    found: list = []
    article = next(tree.iter("article"), None)
    h1 = next(tree.iter("h1"), None)
    around = h1
    for _ in range(AROUND_HEADING):
        if around is None or around.getparent() is None or around.getparent().tag == "body":
            break
        around = around.getparent()
    for el in (around, article):
        if el is None or any(el is f or any(a is f for a in el.iterancestors()) for f in found):
            continue
        found.append(el)
    if not found:
        main = next(tree.iter("main"), None)
        found = [main] if main is not None else []
    return found


def _in_scopes(tree) -> list:
    """The byline elements (`_marked`) of each scope, in scope order, each element once."""
    seen: set = set()
    out = []
    for scope in _scopes(tree):
        for el in _marked(scope):
            if el not in seen:
                seen.add(el)
                out.append(el)
    return out


def _marked(scope) -> list:
    """The elements of `scope` (itself included), in document order, whose class names an
    author, a byline, a user name, a date or a publication, or that are marked as the author
    (`itemprop`, `rel`, `data-author`). A walk in C with the tests in Python: an XPath query
    with the same tests costs about 1.7 times as much, libxml2 building a node set for each
    attribute it tests on each element."""
    found = []
    search = _MARKED_CLASS.search
    for el in scope.iter(lxml.etree.Element):
        get = el.get
        cls = get("class")
        if (
            (cls is not None and search(cls))
            or get("itemprop") == "author"
            or get("rel") == "author"
            or get("data-author") is not None
        ):
            found.append(el)
    return found


def _byline_author(marked: list) -> str | None:
    """The author the page shows: microdata, a `rel=author` link, a byline or author element,
    a forum post's author; the first that reads as a name."""
    ranked: list[tuple[int, int, str]] = []
    for i, el in enumerate(marked[:MARKED_MAX]):
        cls = el.get("class") or ""
        if len(el) > MARKED_CHILDREN:  # a block around the byline, not the byline
            continue
        if el.get("itemprop") == "author":
            names = [n for n in el.iter() if n.get("itemprop") == "name"]
            raw = (names[0].get("content") or _text(names[0])) if names else _text(el)
            rank = 0
        elif el.get("rel") == "author":
            raw, rank = _text(el), 1
        elif el.get("data-author"):
            raw, rank = el.get("data-author"), 3
        elif "username" in cls:
            raw, rank = _text(el), 4
        else:
            if not _AUTHOR_CLASS.search(cls) or _NOT_A_BYLINE.search(cls):
                continue
            raw, rank = _text(el), 2
        name = _name(raw)
        if name:
            ranked.append((rank, i, name))
    return min(ranked)[2] if ranked else None


def _text(el) -> str:
    return lxml.etree.tostring(el, method="text", encoding="unicode", with_tail=False)


def _name(raw: str | None) -> str | None:
    """`raw` as a person's or account's name, or None when it does not read as one."""
    if not raw:
        return None
    text = _BY.sub("", " ".join(raw.split()))
    text = _NAME_END.sub("", text).strip(" :-–")
    words = text.split()
    if not words or len(words) > 5 or len(text) > 60 or text.lower() in ("author", "name", "by"):
        return None
    if _SHOWN_DATE.search(text) or _DAY.search(text) or _looks_like_url(text) or "@" in text:
        return None
    return text


def _language(tree, meta: dict[str, str], ld: dict[str, str]) -> str | None:
    for value in (tree.get("lang"), tree.get("xml:lang"), meta.get("language"), ld.get("language")):
        if value:
            value = value.split(",")[0].strip().replace("_", "-")
            if _LANG.match(value):
                return value
    return None


def _canonical(links: list, url: str, meta: dict[str, str]) -> str | None:
    candidates = [
        el.get("href")
        for el in links
        if el.get("href") is not None and "canonical" in (el.get("rel") or "").lower().split()
    ]
    candidates.append(meta.get("og:url"))
    for href in candidates:
        if not href:
            continue
        try:
            full = urljoin(url, href.strip()) if url else href.strip()
            parts = urlsplit(full)
        except ValueError:
            continue
        if parts.scheme in ("http", "https") and parts.netloc:
            return full
    return None


def _looks_like_url(s: str) -> bool:
    return s.startswith(("http://", "https://", "/"))


def _short(s: str | None, limit: int = FIELD_MAX) -> str | None:
    if not s:
        return None
    s = " ".join(s.split())
    if not s:
        return None
    return s if len(s) <= limit else s[: limit - 1].rstrip() + "…"
