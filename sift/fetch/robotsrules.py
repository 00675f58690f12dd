"""What a robots.txt says to our product token, read in a render child (RFC 9309).

protego parses the file (docs/WORKER.md §robots.txt says why a library); its objects for a
500 KiB file of wildcard rules take tens of MiB, so the parse runs in a render child and only
`RobotsRules`, plain data, comes back (docs/SECURITY.md §Bounds on upstream bytes). Pure
functions: `read_rules` in the child, `first_match` wherever the rules are matched.
"""

from __future__ import annotations

from dataclasses import dataclass

from protego import Protego

from sift.fetch import content_signals


@dataclass(frozen=True, slots=True)
class RobotsRules:
    """What one robots.txt says to our product token, as plain data: the render child parses
    the file and sends back only this (docs/SECURITY.md §Bounds on upstream bytes).

    `rules` are `(allow, pattern)` pairs, each pattern as protego quoted it, in the order
    protego tries them (longest first, `Allow` before `Disallow` on a tie): the first that
    matches decides, and none matching allows. Fields read from other lines of the file
    belong here too, so every reading of the file happens in its one parse in the child."""

    rules: tuple[tuple[bool, str], ...] = ()
    crawl_delay: float | None = None
    signals: content_signals.Signals = content_signals.NONE  # its Content-Signal lines

    @property
    def nbytes(self) -> int:
        """What these rules hold in memory, roughly (the bound on kept rules counts this)."""
        rules = sum(RULE_OVERHEAD + len(p) for _, p in self.rules)
        return RULES_OVERHEAD + rules + content_signals.nbytes(self.signals)


RULES_OVERHEAD = 200  # bytes a kept entry costs besides its rules (objects, dict slot)
RULE_OVERHEAD = 120  # bytes one rule costs besides its pattern's characters


def read_rules(body: str, token: str) -> RobotsRules:
    """The rules of a robots.txt body for `token` (run in a render child: protego's objects
    for a 500 KiB file of wildcard rules take tens of MiB)."""
    signals = content_signals.parse(body)
    rule_set = Protego.parse(body)._get_matching_rule_set(token)
    if rule_set is None:
        return RobotsRules(signals=signals)
    rules = tuple((rule.field == "allow", rule.value._pattern) for rule in rule_set._rules)
    return RobotsRules(rules, rule_set.crawl_delay, signals)


def first_match(rules: tuple[tuple[bool, str], ...], path: str) -> tuple[bool, str] | None:
    """The rule that decides for `path` (a quoted path and query), or None: RFC 9309 §2.2.2
    matching as protego does it (`*` any run of characters, a final `$` the end), each
    pattern tried left to right with `str.find`, so a check costs time linear in the rules'
    size and the path's, whatever the patterns."""
    for allow, pattern in rules:
        if _matches(pattern, path):
            return allow, pattern
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
