"""What a robots.txt says to our product token, read in a render child (RFC 9309).

protego parses the file (docs/WORKER.md §robots.txt says why a library); its objects for a
500 KiB file of wildcard rules take tens of MiB, so the parse runs in a render child and only
`RobotsRules`, plain data, comes back (docs/SECURITY.md §Bounds on upstream bytes). Pure
functions: `read_rules` in the child, `first_match` wherever the rules are matched.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from protego import Protego

from sift.fetch import content_signals


@dataclass(frozen=True, slots=True)
class RobotsRules:
    """What one robots.txt says to our product token, as plain data: the render child parses
    the file and sends back only this (docs/SECURITY.md §Bounds on upstream bytes).

    The rules are two flat values, not a tuple of pairs: `patterns`, each pattern as protego
    quoted it, joined by newlines (a robots.txt line has none), and `allows`, one byte per
    pattern (1 for `Allow`), in the order protego tries them (longest first, `Allow` before
    `Disallow` on a tie): the first that matches decides, and none matching allows. Kept this
    way the rules of a 500 KiB file hold about 0.5 MB rather than 3.7 MB of small objects, and
    crossing a pipe to or from a render child is a copy, not the (un)pickling of tens of
    thousands of objects on the event loop. Fields read from other lines of the file belong
    here too, so every reading of the file happens in its one parse in the child."""

    patterns: str = ""
    allows: bytes = b""
    crawl_delay: float | None = None
    signals: content_signals.Signals = content_signals.NONE  # its Content-Signal lines

    @property
    def rules(self) -> tuple[tuple[bool, str], ...]:
        """The `(allow, pattern)` pairs (built on each call: for reading, not for keeping)."""
        if not self.allows:
            return ()
        return tuple(zip(map(bool, self.allows), self.patterns.split("\n"), strict=True))

    @property
    def nbytes(self) -> int:
        """What these rules hold in memory (the bound on kept rules counts this)."""
        text = sys.getsizeof(self.patterns) + sys.getsizeof(self.allows)
        return RULES_OVERHEAD + text + content_signals.nbytes(self.signals)


RULES_OVERHEAD = 512  # bytes a kept entry costs besides its rules (objects, dict slot)


def read_rules(body: str, token: str) -> RobotsRules:
    """The rules of a robots.txt body for `token` (run in a render child: protego's objects
    for a 500 KiB file of wildcard rules take tens of MiB)."""
    signals = content_signals.parse(body)
    rule_set = Protego.parse(body)._get_matching_rule_set(token)
    if rule_set is None:
        return RobotsRules(signals=signals)
    rules = rule_set._rules
    return RobotsRules(
        "\n".join(rule.value._pattern for rule in rules),
        bytes(rule.field == "allow" for rule in rules),
        rule_set.crawl_delay,
        signals,
    )


def first_match(rules: RobotsRules, path: str) -> tuple[bool, str] | None:
    """The rule that decides for `path` (a quoted path and query), or None: RFC 9309 §2.2.2
    matching as protego does it (`*` any run of characters, a final `$` the end), each
    pattern tried left to right with `str.find`, so a check costs time linear in the rules'
    size and the path's, whatever the patterns."""
    if not rules.allows:
        return None
    for allow, pattern in zip(rules.allows, rules.patterns.split("\n"), strict=True):
        if _matches(pattern, path):
            return bool(allow), pattern
    return None


def _matches(pattern: str, path: str) -> bool:
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    if "*" not in body:
        return path == body if anchored else path.startswith(body)
    parts = body.split("*")
    if not path.startswith(parts[0]):
        return False
    pos = len(parts[0])
    for part in parts[1:-1]:
        if part:
            at = path.find(part, pos)
            if at == -1:
                return False
            pos = at + len(part)
    last = parts[-1]
    if anchored:
        return len(path) - len(last) >= pos and path.endswith(last)
    return not last or path.find(last, pos) != -1
