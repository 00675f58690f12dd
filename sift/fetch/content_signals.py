"""Content Signals: the `Content-Signal:` lines of a robots.txt, as pure functions
(docs/WORKER.md §Content Signals).

A site states how its content may be used, per use, inside its robots.txt groups:
`Content-Signal: search=yes, ai-input=no, ai-train=no`. protego (the robots.txt parser) skips
the line, so it is read here. Sift fetches pages as live input for AI agents, so the one use it
checks is `ai-input`; `search` and `ai-train` are parsed and kept, never acted on.

Which lines apply, following RFC 9309's groups: the groups whose `User-agent` is Sift's product
token (case-insensitive), else the `*` groups; lines before any group apply to every agent,
and a matching group's own value for a use wins over them. A line may start with a path
(`Content-Signal: /archive/ ai-input=no`): it then covers only the paths under it, and the
longest covering path wins. Only `yes` and `no` mean anything; other values, unknown uses and
malformed pairs are ignored, as robots.txt parsers ignore what they do not know.

The input is untrusted: at most `MAX_CHARS` characters are read (the rest is ignored, as
RFC 9309 §2.5 lets a parser cut a long file), at most `MAX_LINES_KEPT` signal lines are kept
and `MAX_PAIRS` pairs per line, so a hostile file costs bounded time and memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_CHARS = 512 * 1024  # characters of robots.txt read for signals
MAX_LINES_KEPT = 256  # Content-Signal lines kept per file
MAX_PAIRS = 16  # use=value pairs read per line
AI_INPUT = "ai-input"
_USE = re.compile(r"[a-z][a-z0-9-]{0,31}")
_FIELD = re.compile(r"^\s*([A-Za-z-]+)\s*:\s*(.*?)\s*$")


@dataclass(frozen=True, slots=True)
class Line:
    """One `Content-Signal:` line: the agents of its group (empty: before any group), the path
    it covers, and its uses (`{"ai-input": False, …}`)."""

    agents: tuple[str, ...]
    path: str
    uses: dict[str, bool]


@dataclass(frozen=True, slots=True)
class Signals:
    lines: tuple[Line, ...] = field(default_factory=tuple)

    def __bool__(self) -> bool:
        return bool(self.lines)


NONE = Signals()
LINE_OVERHEAD = 200  # bytes a kept line costs besides its strings (objects, its uses' dict)


def nbytes(signals: Signals) -> int:
    """What kept lines hold in memory, roughly (the bound on kept robots rules counts this)."""
    return sum(
        LINE_OVERHEAD + len(ln.path) + sum(map(len, ln.agents)) + 40 * len(ln.uses)
        for ln in signals.lines
    )


def parse(text: str) -> Signals:
    """Every Content-Signal line of a robots.txt body, with the group it sits in."""
    lines: list[Line] = []
    agents: list[str] = []
    in_agents = False  # the previous field was a User-agent line: more agents of one group
    for raw in text[:MAX_CHARS].splitlines():
        m = _FIELD.match(raw.split("#", 1)[0])
        if not m:
            continue
        name, value = m.group(1).lower(), m.group(2)
        if name == "user-agent":
            if not in_agents:
                agents = []
            agents.append(value.lower())
            in_agents = True
            continue
        in_agents = False
        if name == "content-signal" and len(lines) < MAX_LINES_KEPT:
            line = _line(tuple(agents), value)
            if line.uses:
                lines.append(line)
    return Signals(tuple(lines))


def _line(agents: tuple[str, ...], value: str) -> Line:
    path = "/"
    first, _, rest = value.partition(" ")
    if first.startswith("/"):
        path, value = first, rest
    uses: dict[str, bool] = {}
    for pair in value.split(",")[:MAX_PAIRS]:
        use, eq, said = (s.strip().lower() for s in pair.partition("="))
        if eq and _USE.fullmatch(use) and said in ("yes", "no"):
            uses[use] = said == "yes"
    return Line(agents, path, uses)


def allowed(signals: Signals, path: str, token: str, use: str = AI_INPUT) -> bool | None:
    """What the site says about `use` for `path` and the agent `token`: True, False, or None
    when it says nothing."""
    token = token.lower()
    groups = [ln for ln in signals.lines if ln.agents]
    mine = [ln for ln in groups if token in ln.agents]
    if not mine:
        mine = [ln for ln in groups if "*" in ln.agents]
    for candidates in (mine, [ln for ln in signals.lines if not ln.agents]):
        said = _longest(candidates, path, use)
        if said is not None:
            return said
    return None


def _longest(lines: list[Line], path: str, use: str) -> bool | None:
    best: tuple[int, bool] | None = None
    for ln in lines:
        covers = use in ln.uses and path.startswith(ln.path)
        if covers and (best is None or len(ln.path) >= best[0]):
            best = (len(ln.path), ln.uses[use])
    return None if best is None else best[1]


def refusal(signals: Signals, path: str, token: str) -> str | None:
    """The signal that forbids Sift's fetch of `path` (`ai-input=no`), or None."""
    return f"{AI_INPUT}=no" if allowed(signals, path, token) is False else None
