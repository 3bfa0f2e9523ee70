"""The rule catalog: one Markdown page per rule (``rules/ATT101.md``).

Pages ship inside the wheel as ``attncheck/_rules/`` (``pyproject.toml`` force-includes the
checkout's ``rules/`` there); in a source checkout / editable install they are read from
``rules/`` next to the package.

Page layout (ruff's rule-doc sections)::

    # ATT101 missing-scale
    Severity: error · Default: on · Fix: none

    ## What it does
    ## Why is this bad?
    ## Example
    ## Use instead
    ## Fix safety
    ## References
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

REQUIRED_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety",
                     "References")

_PKG = Path(__file__).resolve().parent.parent  # attncheck/


def rules_dir() -> Path | None:
    """Directory holding the rule pages: ``attncheck/_rules`` (wheel) or ``rules/`` (checkout)."""
    for candidate in (_PKG / "_rules", _PKG.parent / "rules"):
        if candidate.is_dir():
            return candidate
    return None


@lru_cache(maxsize=None)
def page(code: str) -> str | None:
    """The Markdown text of ``code``'s page, or ``None`` when there is no page."""
    d = rules_dir()
    if d is None:
        return None
    p = d / f"{code.upper()}.md"
    try:
        return p.read_text(encoding="utf-8")
    except OSError:
        return None


def sections(text: str) -> dict[str, str]:
    """``## Heading`` → body text (up to the next ``##`` heading; fenced code is kept whole)."""
    out: dict[str, str] = {}
    current: str | None = None
    buf: list[str] = []
    in_fence = False
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        if not in_fence and line.startswith("## "):
            if current is not None:
                out[current] = "".join(buf).strip("\n")
            current = line[3:].strip()
            buf = []
        elif current is not None:
            buf.append(line)
    if current is not None:
        out[current] = "".join(buf).strip("\n")
    return out


_FENCE_RE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def code_blocks(text: str, lang: str = "python") -> list[str]:
    """The fenced code blocks of ``text`` whose info string starts with ``lang``."""
    return [m.group(2) for m in _FENCE_RE.finditer(text) if m.group(1) == lang]


def header(text: str) -> dict[str, str]:
    """The first heading and the ``Severity: … · Default: … · Fix: …`` line, parsed.

    Returns keys ``code``, ``name`` and the lower-cased keys of the metadata line
    (``severity``, ``default``, ``fix``) where present."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("# "):
            parts = line[2:].split(None, 1)
            out["code"] = parts[0]
            if len(parts) > 1:
                out["name"] = parts[1].strip()
            for meta in lines[i + 1:i + 4]:
                for item in re.split(r"\s*[·|]\s*", meta):
                    k, sep, v = item.partition(":")
                    if sep and k.strip():
                        out[k.strip().lower()] = v.strip()
            break
    return out


def description(code: str) -> str | None:
    """The *What it does* section of ``code``'s page (SARIF ``fullDescription``)."""
    text = page(code)
    if text is None:
        return None
    return sections(text).get("What it does") or None


def fix_kind(code: str) -> str | None:
    """``none`` / ``safe`` / ``unsafe`` from the page's metadata line, when present."""
    text = page(code)
    if text is None:
        return None
    return header(text).get("fix")
