"""The shell blocks of README.md and docs/*.md that are meant to run, as commands.

A fenced ``bash`` / ``console`` block is meant to run when the line just before its fence is
``<!-- docs-test: run -->`` (``<!-- docs-test: run, output -->``: also compare what a command
prints with the lines that follow it in a ``console`` block).  In a ``bash`` block every line that
is not blank or a comment is a command; in a ``console`` block the lines starting with ``$ `` are
(a trailing ``\\`` continues a command on the next line), the others are its output.  A command's
expected exit status is 0 unless its trailing comment says ``exits N``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_MARK = re.compile(r"^<!--\s*docs-test:\s*run(?P<output>\s*,\s*output)?\s*-->\s*$")
_FENCE = re.compile(r"^```(\w*)\s*$")
_EXITS = re.compile(r"\bexits (\d+)\b")


@dataclass
class Command:
    source: str            # "README.md:123" (line of the command)
    line: str              # as written, comment included
    expected_status: int
    expected_output: list[str] | None = None   # console blocks marked "output"


@dataclass
class Block:
    source: str
    language: str
    commands: list[Command] = field(default_factory=list)


def _split_comment(line: str) -> tuple[str, str]:
    """(command, comment) with the comment starting at the first ``#`` outside quotes."""
    in_single = in_double = False
    for i, ch in enumerate(line):
        if ch == "'" and not in_double:
            in_single = not in_single
        elif ch == '"' and not in_single:
            in_double = not in_double
        elif ch == "#" and not in_single and not in_double and (i == 0 or line[i - 1] == " "):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), ""


def _command(source: str, text: str, output: list[str] | None) -> Command:
    cmd, comment = _split_comment(text)
    m = _EXITS.search(comment)
    return Command(source, cmd, int(m.group(1)) if m else 0, output)


def marked_blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    rel = path.relative_to(ROOT).as_posix()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        mark = _MARK.match(lines[i])
        if not mark:
            i += 1
            continue
        fence = _FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if fence is None or fence.group(1) not in ("bash", "console"):
            raise ValueError(f"{rel}:{i + 1}: docs-test mark not followed by a bash/console "
                             f"block")
        lang = fence.group(1)
        j = i + 2
        body: list[tuple[int, str]] = []
        while not lines[j].startswith("```"):
            body.append((j + 1, lines[j]))
            j += 1
        block = Block(f"{rel}:{i + 2}", lang)
        if lang == "bash":
            for n, text in body:
                if text.strip() and not text.lstrip().startswith("#"):
                    block.commands.append(_command(f"{rel}:{n}", text, None))
        else:
            k = 0
            while k < len(body):
                n, text = body[k]
                if not text.startswith("$ "):
                    k += 1
                    continue
                text = text[2:]
                while text.endswith("\\") and k + 1 < len(body):
                    k += 1
                    text = text[:-1] + " " + body[k][1].strip()
                k += 1
                out = []
                while k < len(body) and not body[k][1].startswith("$ "):
                    out.append(body[k][1])
                    k += 1
                block.commands.append(_command(f"{rel}:{n}", text,
                                               out if mark.group("output") else None))
        blocks.append(block)
        i = j + 1
    return blocks


def all_marked_blocks() -> list[Block]:
    return [b for p in DOCS for b in marked_blocks(p)]
