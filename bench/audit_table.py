"""Regenerate the docs' results tables (CPU, offline).

Usage::

    python bench/audit_table.py [SPEC ...]          # built-in families: Markdown table, model × check
    python bench/audit_table.py --sweep SWEEP.json  # the zoo: a sweep written by
                                                    # `attncheck audit hf:all --format json > SWEEP.json`
"""
from __future__ import annotations

import re
import sys

import attncheck

SPECS = ["hf:gpt2", "hf:llama", "hf:bert", "hf:mistral", "hf:qwen2", "hf:t5", "hf:vit",
         "xt:decoder", "torch:MultiheadAttention"]


def main(specs: list[str]) -> None:
    rows, columns = [], []
    for spec in specs:
        report = attncheck.audit(spec)
        cells: dict[str, list[str]] = {}
        variants: list[str] = []
        for r in report.results:
            m = re.fullmatch(r"(.+?)\[(.+)\]", r.check)
            check, variant = (m.group(1), m.group(2)) if m else (r.check, None)
            if variant and variant not in variants:
                variants.append(variant)
            cells.setdefault(check, []).append(r.status)
            if check not in columns:
                columns.append(check)
        verdict = "OK" if report.ok else "FAIL"
        rows.append((spec, "/".join(variants), cells, verdict))
    print("| model | variants | " + " | ".join(columns) + " | verdict |")
    print("|---|---|" + "---|" * len(columns) + "---|")
    for spec, variants, cells, verdict in rows:
        print(f"| `{spec}` | {variants} | "
              + " | ".join("/".join(cells.get(c, ["–"])) for c in columns) + f" | {verdict} |")


def sweep_table(path: str) -> None:
    import json

    from attncheck.audit.sweep import markdown_table

    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    cmd = (f"attncheck audit hf:all --jobs {doc['jobs']} --dtype {doc['dtype']} --format json")
    print(markdown_table(doc, cmd))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--sweep"]:
        sweep_table(sys.argv[2])
    else:
        main(sys.argv[1:] or SPECS)
