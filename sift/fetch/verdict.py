"""What a fetched page is, as well as what it says: ok, thin, empty, a not-found page served with
200 (`soft_404`), a bot challenge (`bot_wall`) or a login form (`login_wall`).

Read from the upstream bytes inside the render child (docs/EXTRACTION.md §Verdicts): a page with
plenty of main content is `ok` without further look; only a page with little of it is checked
against the signatures walls and not-found pages share, so a long article that mentions a
captcha or a 404 stays `ok`. Every signature needs a short page as well as its words.
"""

from __future__ import annotations

import re
from collections.abc import Callable

VERDICTS = ("ok", "thin", "empty", "soft_404", "bot_wall", "login_wall")
FAILING = ("empty", "soft_404", "bot_wall", "login_wall")  # fail the target unless accepted

WALL_MAX = 1200  # characters of main content above which a page is no wall and no 404
THIN_MAX = 300  # characters of main content below which a page is thin
SCAN_MAX = 65_536  # characters of the page searched for signatures (walls are small pages)

# Challenge and interstitial pages of the common bot-management services (where each comes
# from: tests/fixtures/verdicts/README.md). Only what their challenge pages carry and ordinary
# pages of the same sites do not: the scripts some of them inject into every page (a
# `/cdn-cgi/challenge-platform` script, a firewall's resource script) would name half the web's
# forums.
_BOT_MARKUP = re.compile(
    r"cf_chl_opt|cf-browser-verification|cf-challenge-running|captcha-delivery\.com"
    r"|px-captcha|ddos-guard\.net/"
)
# What the same pages say, read in their title, heading and main text only.
_BOT_WORDS = re.compile(
    r"just a moment\.\.\.|attention required!|checking your browser|pardon our interruption"
    r"|checking if the site connection is secure|verify(?:ing)? (?:that )?you are (?:a )?human"
    r"|are you a robot|enable javascript and cookies to continue|press (?:&|and) hold"
    r"|please enable js and disable any ad blocker|access denied.{0,200}reference #\d"
    r"|request unsuccessful\..{0,40}incident id|website firewall - access denied"
    r"|security check to access",
    re.S,
)
# Bounded, so a page of unclosed `<input` tags cannot make the search quadratic.
_PASSWORD = re.compile(r"""<input[^>]{0,300}type\s*=\s*["']?password""")
_LOGIN_WORDS = re.compile(
    r"\b(?:log ?in|sign ?in|signin|login)\b|\b(?:log|sign) in to (?:continue|view|see|read)"
    r"|you (?:must|need to) (?:be logged in|log in|sign in)"
)
LOGIN_MAX = 400  # characters of main content a login form with no login headline may have
_NOT_FOUND = re.compile(
    r"\b404\b|\bnot found\b|page (?:does not|doesn't|could not|can't|cannot) (?:exist|be found)"
    r"|no longer (?:exists|available)|(?:page|content) you (?:are|were|'re) looking for"
    r"|nothing (?:was )?found|page (?:is )?missing|\bseite nicht gefunden\b"
    r"|page (?:introuvable|non trouvée)|página no encontrada"
)
EMPTY_MAX = 64  # characters of visible text of a page that is empty
# A tag, bounded so that a page of unclosed `<` cannot make the search quadratic (a longer tag
# counts as text: the page is then thin, not empty).
_TAG = re.compile(r"<[^<>]{0,300}>")


def page_verdict(
    main: str, lowered_html: str, headline: str, visible: Callable[[], int] = lambda: 0
) -> str:
    """The verdict for an HTML page: `main` its main content (as the mode gives it), the page
    lower-cased (`lowered_html`, the first `SCAN_MAX` characters are read), its title and
    first heading lower-cased (`headline`); `visible` counts the page's visible characters,
    asked only when the main content is empty."""
    size = len(main.strip())
    if size > WALL_MAX:
        return "ok"
    page = lowered_html[:SCAN_MAX]
    said = f"{headline}\n{main.lower()}"
    if _BOT_MARKUP.search(page) or _BOT_WORDS.search(said):
        return "bot_wall"
    if _PASSWORD.search(page) and (
        _LOGIN_WORDS.search(headline) or (size < LOGIN_MAX and _LOGIN_WORDS.search(said))
    ):
        return "login_wall"
    if _NOT_FOUND.search(headline):
        return "soft_404"
    if size == 0:
        # Nothing the extractor could read; empty only if the page shows no text at all, as
        # parsed and as written (markup the parser could not make sense of keeps its words).
        if visible() < EMPTY_MAX and len("".join(_TAG.sub(" ", page).split())) < EMPTY_MAX:
            return "empty"
        return "thin"
    return "thin" if size < THIN_MAX else "ok"


def body_verdict(content: str) -> str:
    """The verdict for a body that is not HTML (JSON, a feed, text): empty or ok."""
    return "ok" if content.strip() else "empty"
