"""Real-code precision of ``attncheck lint``: pinned packages, a checked-in triage file, a diff.

The corpus is ten-odd public packages that implement attention in many styles (transformers,
timm, diffusers, fairseq, open_clip, torchtune, xformers and lucidrains' packages), each at a
pinned version fetched with ``pip download --no-deps PKG==VERSION`` (a wheel, or the sdist
where the package has no pure wheel) and unpacked into a cache directory outside the checkout
(``~/.cache/attncheck-corpus`` by default, ``$ATTNCHECK_CORPUS_DIR`` or ``--cache-dir``).

Every package is linted with the default rule selection (every rule that is not ``info``) and
every finding is matched against the triage file (``bench/corpus_triage.toml``), where each
finding a maintainer has read carries a label:

- ``true-bug``: wrong numerics on some input the code accepts;
- ``hazard``: correct today but fragile in a way the package's maintainer would want to know
  (fp16 overflow on a path that is fp32 today, dropout that a caller can leave on in eval());
- ``false-positive``: the code is right and the rule is wrong.

A triage entry is keyed by what survives unrelated edits of the file, not by line numbers:
``package`` (the distribution name, no version), ``path`` (inside the unpacked package),
``rule``, ``function`` (the qualified name of the innermost enclosing ``def``/``class``:
``Prenet.forward``; ``<module>`` at top level) and ``line`` (the source line of the finding with
comments dropped and whitespace collapsed).  One entry matches every finding with its key.

The script prints the precision per rule ((true bugs + hazards) / findings triaged), the
findings no entry matches (*new*) and the entries no finding matches (*vanished*: a fixed false
positive or a lost true finding), and exits 1 when there are new findings, 0 otherwise.
``--write-new FILE`` appends the new findings to FILE as entries with ``label = "untriaged"``,
ready to be read and labelled.

Usage::

    python bench/corpus.py                      # download what is missing, lint, diff
    python bench/corpus.py --only fairseq,timm  # a subset of the packages
    python bench/corpus.py --json out.json      # machine-readable summary as well
    python bench/corpus.py --offline            # use only what is already in the cache

Triage file format::

    [[finding]]
    package = "fairseq"
    path = "fairseq/modules/multihead_attention.py"
    rule = "ATT204"
    function = "MultiheadAttention.forward"
    line = 'attn_weights = attn_weights.masked_fill(key_padding_mask, float("-inf"))'
    label = "true-bug"
    reason = "one line saying why"
"""
from __future__ import annotations

import argparse
import ast
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tokenize
import tomllib
import zipfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: (distribution, pinned version, extra ``pip download`` arguments).  xformers ships only
#: platform wheels: the platform and Python are pinned so the same file is fetched everywhere.
PACKAGES: list[tuple[str, str, tuple[str, ...]]] = [
    ("transformers", "5.24.0", ()),
    ("timm", "1.0.31", ()),
    ("diffusers", "0.42.1", ()),
    ("fairseq", "0.12.2", ()),
    ("open_clip_torch", "3.3.0", ()),
    ("torchtune", "0.6.1", ()),
    ("xformers", "0.0.35", ("--only-binary=:all:", "--platform", "manylinux_2_28_x86_64",
                            "--python-version", "3.12", "--implementation", "cp")),
    ("x-transformers", "2.31.10", ()),
    ("vit-pytorch", "1.11.0", ()),
    ("perceiver-pytorch", "0.11.0", ()),
    ("slot-attention", "1.5.2", ()),
]

LABELS = ("true-bug", "hazard", "false-positive")
GOOD = ("true-bug", "hazard")
KEY_FIELDS = ("package", "path", "rule", "function", "line")


def default_cache_dir() -> Path:
    env = os.environ.get("ATTNCHECK_CORPUS_DIR")
    return Path(env) if env else Path.home() / ".cache" / "attncheck-corpus"


def _norm_dist(name: str) -> str:
    """The distribution's file-name spelling (PEP 427: ``-``/``.`` → ``_``, lower case)."""
    return re.sub(r"[-_.]+", "_", name).lower()


# ----------------------------------------------------------------------------- fetching


def _archive(dl: Path, name: str, version: str) -> Path | None:
    """The wheel or sdist of ``name==version`` in ``dl`` (``NAME-VERSION-….whl`` or
    ``NAME-VERSION.tar.gz``, the name in either spelling)."""
    for p in sorted(dl.iterdir()) if dl.is_dir() else ():
        if not p.is_file() or not p.name.endswith((".whl", ".tar.gz", ".zip")):
            continue
        stem = p.name[:-len(".tar.gz")] if p.name.endswith(".tar.gz") else p.name.rsplit(".", 1)[0]
        # the version is the first dash-separated part that starts with a digit
        parts = stem.split("-")
        vi = next((i for i, x in enumerate(parts) if i and x[:1].isdigit()), None)
        if vi is None:
            continue
        if _norm_dist("-".join(parts[:vi])) == _norm_dist(name) and parts[vi] == version:
            return p
    return None


def fetch(name: str, version: str, extra: tuple[str, ...], cache: Path, offline: bool) -> Path:
    """The unpacked tree of ``name==version`` under ``cache/src`` (downloaded when absent)."""
    dest = cache / "src" / f"{_norm_dist(name)}-{version}"
    if (dest / ".unpacked").exists():
        return dest
    dl = cache / "dl"
    dl.mkdir(parents=True, exist_ok=True)
    arch = _archive(dl, name, version)
    if arch is None:
        if offline:
            raise SystemExit(f"corpus: {name}=={version} is not in {dl} and --offline was given")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "-d", str(dl), *extra, f"{name}=={version}"]
        print(f"corpus: {' '.join(cmd[2:])}", file=sys.stderr)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        arch = _archive(dl, name, version)
        if arch is None:
            raise SystemExit(f"corpus: pip saved no archive of {name}=={version} in {dl}")
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if arch.name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(arch) as z:
            z.extractall(tmp)
    else:
        with tarfile.open(arch) as t:
            t.extractall(tmp, filter="data")
        # an sdist unpacks to NAME-VERSION/...; drop that level so paths read as in a wheel
        inner = list(tmp.iterdir())
        if len(inner) == 1 and inner[0].is_dir():
            for child in list(inner[0].iterdir()):
                child.rename(tmp / child.name)
            inner[0].rmdir()
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    (dest / ".unpacked").write_text(arch.name + "\n")
    return dest


# ----------------------------------------------------------------------------- keys


def normalise_line(text: str) -> str:
    """A source line with its comment dropped and runs of whitespace collapsed."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text.strip() + "\n").readline))
        cut = next((t.start[1] for t in toks if t.type == tokenize.COMMENT), None)
        if cut is not None:
            text = text.strip()[:cut]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return " ".join(text.split())


class _Scopes(ast.NodeVisitor):
    """(first line, last line, qualified name) of every ``def`` and ``class`` of a module."""

    def __init__(self) -> None:
        self.spans: list[tuple[int, int, str]] = []
        self._stack: list[str] = []

    def _scope(self, node) -> None:
        self._stack.append(node.name)
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        self.spans.append((start, node.end_lineno or node.lineno, ".".join(self._stack)))
        self.generic_visit(node)
        self._stack.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scope


def enclosing(spans: list[tuple[int, int, str]], line: int) -> str:
    """The innermost qualified name whose span holds ``line`` (``<module>`` when none)."""
    best = None
    for start, end, name in spans:
        if start <= line <= end and (best is None or start >= best[0]):
            best = (start, name)
    return best[1] if best else "<module>"


@dataclass(frozen=True)
class Key:
    package: str
    path: str
    rule: str
    function: str
    line: str

    def as_toml(self) -> str:
        return "".join(f"{f} = {_toml_str(getattr(self, f))}\n" for f in KEY_FIELDS)


def _toml_str(s: str) -> str:
    if "'" not in s and "\n" not in s:
        return f"'{s}'"
    return json.dumps(s, ensure_ascii=False)


@dataclass
class Hit:
    key: Key
    lineno: int
    message: str


def keyed(findings: list[dict], trees: dict[str, Path]) -> list[Hit]:
    """Attach a :class:`Key` to every finding (``path`` absolute, as the linter reports it)."""
    by_file: dict[str, tuple[list[str], list]] = {}
    out: list[Hit] = []
    for f in findings:
        path = Path(f["path"]).resolve()
        pkg, root = next(((p, r) for p, r in trees.items() if path.is_relative_to(r)), (None, None))
        if pkg is None:
            continue
        if str(path) not in by_file:
            text = path.read_text(encoding="utf-8", errors="replace")
            v = _Scopes()
            try:
                v.visit(ast.parse(text))
            except SyntaxError:
                pass
            by_file[str(path)] = (text.splitlines(), v.spans)
        lines, spans = by_file[str(path)]
        src = lines[f["line"] - 1] if 0 < f["line"] <= len(lines) else ""
        key = Key(pkg, path.relative_to(root).as_posix(), f["code"], enclosing(spans, f["line"]),
                  normalise_line(src))
        out.append(Hit(key, f["line"], f["message"]))
    return out


# ----------------------------------------------------------------------------- triage


@dataclass
class Entry:
    key: Key
    label: str
    reason: str


def load_triage(path: Path) -> list[Entry]:
    """The entries of a triage file; ``ValueError`` naming the entry when one is malformed."""
    if not path.exists():
        return []
    with path.open("rb") as fh:
        data = tomllib.load(fh)
    entries: list[Entry] = []
    for i, row in enumerate(data.get("finding", []), 1):
        missing = [f for f in (*KEY_FIELDS, "label", "reason") if f not in row]
        if missing:
            raise ValueError(f"{path}: [[finding]] #{i} lacks {', '.join(missing)}")
        if row["label"] not in LABELS:
            raise ValueError(f"{path}: [[finding]] #{i} ({row['path']}, {row['rule']}): label "
                             f"{row['label']!r} is not one of {', '.join(LABELS)}")
        key = Key(row["package"], row["path"], row["rule"], row["function"],
                  normalise_line(row["line"]))
        entries.append(Entry(key, row["label"], row["reason"]))
    return entries


@dataclass
class Diff:
    """The findings matched against the triage entries."""

    labelled: list[tuple[Hit, Entry]] = field(default_factory=list)
    new: list[Hit] = field(default_factory=list)
    vanished: list[Entry] = field(default_factory=list)

    def per_rule(self) -> dict[str, dict[str, int]]:
        rows: dict[str, Counter] = defaultdict(Counter)
        for hit, e in self.labelled:
            rows[hit.key.rule][e.label] += 1
        for hit in self.new:
            rows[hit.key.rule]["new"] += 1
        return {r: dict(c) for r, c in sorted(rows.items())}

    def precision(self, rule: str | None = None) -> float | None:
        rows = [(h, e) for h, e in self.labelled if rule is None or h.key.rule == rule]
        if not rows:
            return None
        return sum(e.label in GOOD for _, e in rows) / len(rows)


def diff(hits: list[Hit], entries: list[Entry]) -> Diff:
    index = {e.key: e for e in entries}
    out = Diff()
    matched: set[Key] = set()
    for h in hits:
        e = index.get(h.key)
        if e is None:
            out.new.append(h)
        else:
            matched.add(h.key)
            out.labelled.append((h, e))
    out.vanished = [e for e in entries if e.key not in matched]
    return out


# ----------------------------------------------------------------------------- main


def lint(trees: dict[str, Path], jobs: int, cache_dir: Path | None) -> list[dict]:
    """Findings of the default selection on every tree, as the JSON output format's objects."""
    from attncheck.lint.engine import lint_paths
    from attncheck.lint.formatters import finding_to_json

    res = lint_paths([str(p) for p in trees.values()], isolated=True, jobs=jobs, cache_dir=cache_dir)
    if res.errors:
        raise SystemExit("corpus: " + "; ".join(res.errors))
    internal = res.internal_errors
    for f in internal:
        print(f"corpus: internal error (ATT001) in {f.path}: {f.message}", file=sys.stderr)
    return [finding_to_json(f) for f in res.findings if f.code != "ATT001"]


def report(d: Diff, out=None) -> None:
    w = (out or sys.stdout).write
    rows = d.per_rule()
    w(f"{'rule':8} {'findings':>8} {'true-bug':>8} {'hazard':>7} {'false+':>7} {'new':>5} "
      f"{'precision':>9}\n")
    for rule, c in rows.items():
        n = sum(c.values())
        p = d.precision(rule)
        w(f"{rule:8} {n:8d} {c.get('true-bug', 0):8d} {c.get('hazard', 0):7d} "
          f"{c.get('false-positive', 0):7d} {c.get('new', 0):5d} "
          f"{'-' if p is None else f'{p:.0%}':>9}\n")
    total = len(d.labelled) + len(d.new)
    p = d.precision()
    w(f"{'all':8} {total:8d} {sum(e.label == 'true-bug' for _, e in d.labelled):8d} "
      f"{sum(e.label == 'hazard' for _, e in d.labelled):7d} "
      f"{sum(e.label == 'false-positive' for _, e in d.labelled):7d} {len(d.new):5d} "
      f"{'-' if p is None else f'{p:.0%}':>9}\n")
    if d.new:
        w(f"\nnew (untriaged) findings: {len(d.new)}\n")
        for h in d.new:
            w(f"  {h.key.package}/{h.key.path}:{h.lineno} {h.key.rule} [{h.key.function}] "
              f"{h.message}\n")
    if d.vanished:
        w(f"\nvanished (triaged, no longer reported): {len(d.vanished)}\n")
        for e in d.vanished:
            w(f"  {e.key.package}/{e.key.path} {e.key.rule} [{e.key.function}] {e.label}: "
              f"{e.key.line}\n")


def summary(d: Diff) -> dict:
    return {"per_rule": {r: {**c, "precision": d.precision(r)} for r, c in d.per_rule().items()},
            "precision": d.precision(), "findings": len(d.labelled) + len(d.new),
            "new": [{**h.key.__dict__, "lineno": h.lineno, "message": h.message} for h in d.new],
            "vanished": [{**e.key.__dict__, "label": e.label} for e in d.vanished]}


def write_new(d: Diff, path: Path) -> None:
    with path.open("a", encoding="utf-8") as fh:
        for h in d.new:
            fh.write(f"\n[[finding]]\n{h.key.as_toml()}label = 'untriaged'\n"
                     f"reason = {_toml_str('(line ' + str(h.lineno) + ') ' + h.message)}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache-dir", type=Path, default=None,
                    help="download / unpack directory (default ~/.cache/attncheck-corpus)")
    ap.add_argument("--triage", type=Path, default=ROOT / "bench" / "corpus_triage.toml")
    ap.add_argument("--only", default=None, help="comma-separated distribution names")
    ap.add_argument("--offline", action="store_true", help="never call pip; use the cache only")
    ap.add_argument("--jobs", type=int, default=0, help="lint worker processes (0 = all cores)")
    ap.add_argument("--lint-cache", action="store_true",
                    help="keep attncheck's result cache in CACHE_DIR/lint-cache (fast reruns)")
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                    help="lint an already unpacked tree under NAME instead of the pinned packages")
    ap.add_argument("--json", type=Path, default=None, help="also write a JSON summary here")
    ap.add_argument("--write-new", type=Path, default=None,
                    help="append the new findings to this file as untriaged entries")
    args = ap.parse_args(argv)

    cache = args.cache_dir or default_cache_dir()
    trees: dict[str, Path] = {}
    if args.tree:
        for spec in args.tree:
            name, sep, d = spec.partition("=")
            if not sep:
                ap.error(f"--tree wants NAME=DIR, got {spec!r}")
            trees[name] = Path(d).resolve()
    else:
        only = {_norm_dist(n) for n in args.only.split(",")} if args.only else None
        for name, version, extra in PACKAGES:
            if only is None or _norm_dist(name) in only:
                trees[name] = fetch(name, version, extra, cache, args.offline).resolve()
    try:
        entries = load_triage(args.triage)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        print(f"corpus: {exc}", file=sys.stderr)
        return 2
    if not args.tree and args.only:
        entries = [e for e in entries if e.key.package in trees]
    findings = lint(trees, args.jobs, cache / "lint-cache" if args.lint_cache else None)
    d = diff(keyed(findings, trees), entries)
    report(d)
    if args.json:
        args.json.write_text(json.dumps(summary(d), indent=1) + "\n")
    if args.write_new and d.new:
        write_new(d, args.write_new)
    return 1 if d.new else 0


if __name__ == "__main__":
    sys.exit(main())
