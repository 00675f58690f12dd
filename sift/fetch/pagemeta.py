"""What an HTML page says about itself: title, description, author, date, language, site, URL.

Read from the page's `<meta>` and `<link>` tags and its JSON-LD (schema.org) blocks, never
guessed from the text or the URL: a field the page does not state is None
(docs/EXTRACTION.md §Page metadata).
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
_READ_TAGS = ("meta", "script", "time", "link")  # the elements the fields are read from
_ARTICLE = re.compile(r"Article|Posting|Report|WebPage|NewsArticle|Blog", re.I)

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


def page_metadata(tree, url: str, title: str = "") -> dict[str, str | None]:
    """The seven fields for a parsed page (each None when the page does not state it)."""
    # One walk in C gathers every element the fields below read, in document order (a walk or
    # an XPath query per field costs several times more).
    found: dict[str, list] = {tag: [] for tag in _READ_TAGS}
    for el in tree.iter(*_READ_TAGS):
        found[el.tag].append(el)
    meta = _meta_tags(found["meta"])
    ld = _json_ld(found["script"])
    out = empty()
    out["title"] = _short(meta.get("title") or ld.get("title") or title)
    out["description"] = _short(meta.get("description") or ld.get("description"), DESCRIPTION_MAX)
    author = meta.get("author")
    if not author or _looks_like_url(author):
        author = ld.get("author") or (None if author and _looks_like_url(author) else author)
    out["author"] = _short(author)
    out["published"] = (
        _date(ld.get("published")) or _date(meta.get("published")) or _time_tag(tree, found["time"])
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
        if "site_name" not in out:
            names = _names(node.get("publisher"))
            if names:
                out["site_name"] = names[0]
    return out


def _collect(value, nodes: list[dict]) -> None:
    stack = [value]
    while stack and len(nodes) < _NODES_MAX:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(reversed(v))
        elif isinstance(v, dict):
            if "@graph" in v:
                stack.append(v["@graph"])
            if "@type" in v:
                nodes.append(v)


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
            return None
    if when.tzinfo is None:
        return when.date().isoformat()
    return when.isoformat().replace("+00:00", "Z")


def _time_tag(tree, times: list) -> str | None:
    for el in times:
        if el.get("pubdate") is not None:
            v = el.get("datetime")
            if v is not None:
                return _date(v)
    for v in _ITEMPROP_TIME(tree)[:1]:
        return _date(str(v))
    return None


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
