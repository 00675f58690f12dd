"""Shaping a job's results for `sift batch status` (docs/BATCH.md §Results).

`json` is the status body as the API sends it; `md` is for people: a heading per target with
its status, error and hint, then its content; `--out DIR` writes one file per done target
(named by idx and host, `.md`/`.txt`/`.json`/`.html` by mode and content type) and an
`index.json` that maps every target to its file or its error; a link planted in the folder is
replaced, never followed.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from pathlib import Path

from sift.atomicfile import replace_file
from sift.cli import advice
from sift.cli.client import ClientConfigError, ClientError
from sift.cli.progress import counts, tally, wire_counts

INDEX = "index.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9.-]+")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^( {0,3})(#{1,6})(?=[ \t]|$)")
BELOW_TARGET = 2  # levels a page's headings move down: its `#` becomes `###`, under `## IDX.`


def select_target(body: dict, idx: int) -> dict:
    """The body narrowed to target `idx` (a usage error when the job has no such target)."""
    for t in body.get("targets", []):
        if t.get("idx") == idx:
            return {**body, "targets": [t]}
    total = body.get("targets_total", 0)
    raise ClientConfigError(f"--target {idx}: the job's targets are 0 to {total - 1}")


def as_json(body: dict, *, single: bool = False) -> str:
    """The body (or, with `single`, its one target) as indented JSON."""
    shown = body["targets"][0] if single else body
    return json.dumps(shown, indent=2, ensure_ascii=False) + "\n"


def as_markdown(body: dict, *, single: bool = False) -> str:
    parts = []
    if not single:
        head = f"# Job {body.get('job_id')}: {body.get('status')}"
        parts.append(f"{head}, {tally(*counts(body))}\n")
        if body.get("error"):
            parts.append(f"error: {body['error']}\n")
    for t in body.get("targets", []):
        parts.append(_target_markdown(t, str(body.get("job_id") or "JOB_ID")))
    return "\n".join(parts)


def _target_markdown(t: dict, job_id: str) -> str:
    lines = [f"## {t.get('idx')}. {t.get('url')} ({t.get('status')})", ""]
    if t.get("status") == "failed":
        lines.append(f"error: {t.get('error') or 'unknown'}")
        if t.get("hint"):
            lines.append(f"hint: {advice.hint(t['hint'], target=True, job_id=job_id)}")
        lines.append("")
    result = t.get("result")
    if isinstance(result, dict):
        for note in _notes(result):
            lines.append(f"note: {note}")
        if _notes(result):
            lines.append("")
        content = str(result.get("content", "")).rstrip("\n")
        lines.append(demote_headings(content) if _is_markdown(result) else content)
        lines.append("")
    return "\n".join(lines)


def _is_markdown(result: dict) -> bool:
    """Content whose `#` lines are headings (not raw, text, or a JSON view)."""
    return result.get("mode") in (None, "clean", "markdown", "links") and "json" not in str(
        result.get("content_type", "")
    )


def demote_headings(text: str, by: int = BELOW_TARGET) -> str:
    """The page's ATX headings `by` levels lower (at most `######`), so they sit below the
    per-target heading; lines inside fenced code stay as they are (docs/BATCH.md §Results)."""
    out, fence = [], ""
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if m and (not fence or (m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence))):
            fence = "" if fence else m.group(1)
        elif not fence:
            h = _ATX.match(line)
            if h:
                level = min(6, len(h.group(2)) + by)
                line = h.group(1) + "#" * level + line[h.end() :]
        out.append(line)
    return "\n".join(out)


def _notes(result: dict) -> list[str]:
    notes = [result["note"]] if result.get("note") else []
    if result.get("verdict") not in (None, "ok"):
        notes.append(f"verdict {result['verdict']}")
    if result.get("truncated"):
        notes.append("content truncated; narrow with grep, question or pages")
    return notes


def extension(result: dict) -> str:
    """`.txt` for text, `.json` for JSON (a jq view included), `.html` for raw HTML, else `.md`."""
    ctype = str(result.get("content_type", ""))
    mode = result.get("mode")
    if "json" in ctype:
        return ".json"
    if mode == "text":
        return ".txt"
    if mode == "raw":
        return ".html" if "html" in ctype else ".txt"
    return ".md"


def file_name(t: dict) -> str:
    try:
        parts = urllib.parse.urlsplit(str(t.get("url", "")))
        host = (parts.hostname or "") + (f"_{parts.port}" if parts.port else "")
    except ValueError:
        host = ""
    safe = _UNSAFE.sub("_", host).strip("._")[:80] or "target"
    return f"{int(t['idx']):02d}-{safe}{extension(t.get('result') or {})}"


def write_out_dir(body: dict, out: str) -> dict:
    """Write each done target's content and the index; return the index."""
    folder = Path(out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        entries = [_write_target(folder, t) for t in body.get("targets", [])]
        index = {
            "job_id": body.get("job_id"),
            "status": body.get("status"),
            "error": body.get("error", ""),
            **wire_counts(body),
            "targets": entries,
        }
        _write_new(folder, INDEX, json.dumps(index, indent=2, ensure_ascii=False) + "\n")
    except OSError as e:
        raise ClientError(f"cannot write to {out}: {e.strerror or e}") from None
    return index


def _write_target(folder: Path, t: dict) -> dict:
    entry = {"idx": t.get("idx"), "url": t.get("url"), "status": t.get("status")}
    result = t.get("result")
    if t.get("status") == "done" and isinstance(result, dict):
        name = file_name(t)
        _write_new(folder, name, str(result.get("content", "")))
        entry.update(file=name, title=result.get("title", ""), truncated=result.get("truncated"))
        if result.get("note"):
            entry["note"] = result["note"]
    elif t.get("status") == "failed":
        entry.update(error=t.get("error"), hint=t.get("hint"))
    return entry


def _write_new(folder: Path, name: str, text: str) -> None:
    """Write `folder/name` as a new file: written to a fresh temporary file (`O_EXCL`) and
    renamed over the name, so a symbolic link or hard link planted in the folder is replaced,
    never followed (docs/SECURITY.md §Terminal output)."""
    replace_file(folder / name, text, 0o644 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
