"""Which of the extractor's two readings suits a page, from what the page says it is.

trafilatura reads a page in one of two ways. Leaning to recall keeps more of an article's edges;
that is what the older article benchmarks reward, and what Sift uses for any page that does not
say otherwise. Its balanced reading retries a short extract that covers little of the page, and
on a forum thread takes the replies as content: on pages that are not articles (a site's home or
service page, a forum thread) the recall reading often stops at the first block of text.

A page that declares itself a website page (`og:type` website, or schema.org `WebPage` or
`WebSite` in its JSON-LD) or a forum thread (`DiscussionForumPosting`), and declares no article,
question-and-answer or product type, is read the balanced way. Both signals come from elements
the render has already collected (`pagemeta.page_elements`), so the choice costs a regex over
the page's JSON-LD. Rule and figures: docs/EXTRACTION.md §Page types.
"""

from __future__ import annotations

import re

BALANCED = "balanced"
RECALL = "recall"

JSON_LD_SCAN_MAX = 200_000  # characters of JSON-LD read per page (types sit near the top)

_TYPE_VALUE = re.compile(r'"@type"\s*:\s*("[^"]{1,100}"|\[[^\]]{1,1000}\])')
_NAME = re.compile(r'"([^"]{1,100})"')
# Types that name a page that is not an article: a site's page, a forum thread.
_NOT_ARTICLE = frozenset({"WebPage", "WebSite", "DiscussionForumPosting"})
# Types that name content the recall reading serves well, whatever else the page declares.
_KEEP_RECALL = re.compile(
    r"Article$|^BlogPosting$|^Report$|^(Question|Answer|FAQPage|QAPage)$|^Product$"
)


def declared_types(scripts: list) -> set[str]:
    """schema.org `@type` names in the page's JSON-LD `script` elements."""
    names: set[str] = set()
    budget = JSON_LD_SCAN_MAX
    for el in scripts:
        if budget <= 0:
            break
        if "ld+json" not in (el.get("type") or ""):
            continue
        text = (el.text or "")[:budget]
        budget -= len(text)
        for m in _TYPE_VALUE.finditer(text):
            names.update(_NAME.findall(m.group(1)))
    return names


def extraction_focus(found: dict[str, list]) -> str:
    """`BALANCED` for a page declared a website page or a forum thread and nothing the recall
    reading serves better, else `RECALL`. `found`: `pagemeta.page_elements` of the page."""
    types = declared_types(found["script"])
    website = any(
        (m.get("property") or "").lower() == "og:type"
        and (m.get("content") or "").strip().lower() == "website"
        for m in found["meta"]
    )
    if not website and not types & _NOT_ARTICLE:
        return RECALL
    if any(_KEEP_RECALL.search(t) for t in types):
        return RECALL
    return BALANCED
