"""Imports run one way (docs/ARCHITECTURE.md §Module map): cli → api/worker → batch → fetch →
guard/gates/store → config/errors, with no module importing a layer above its own."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = (
    ("sift.cli",),
    ("sift.api", "worker"),
    ("sift.batch",),
    ("sift.fetch",),
    ("sift.guard", "sift.gates", "sift.store"),
    ("sift.config", "sift.errors"),
)


def _layer(module: str) -> int | None:
    for i, group in enumerate(LAYERS):
        if any(module == g or module.startswith(g + ".") for g in group):
            return i
    return None


def _imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return out


def test_no_module_imports_a_layer_above_its_own():
    back_edges = []
    for path in [*(ROOT / "sift").rglob("*.py"), *(ROOT / "worker").rglob("*.py")]:
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        own = _layer(module)
        if own is None:
            continue
        for name in _imports(path):
            target = _layer(name)
            if target is not None and target < own:
                back_edges.append(f"{module} -> {name}")
    assert back_edges == []
