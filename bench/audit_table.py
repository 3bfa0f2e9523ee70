"""Regenerate README's results table: `attncheck audit` on the built-in families (CPU, offline).

Usage: python bench/audit_table.py [SPEC ...]   (prints a Markdown table, model × check)
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


if __name__ == "__main__":
    main(sys.argv[1:] or SPECS)
