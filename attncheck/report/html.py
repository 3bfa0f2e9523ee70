"""Self-contained HTML report for ``attncheck audit --html report.html``.

One file, no external resources: inline CSS, figures drawn with matplotlib (Agg backend) and
embedded as base64 PNG.  Sections: summary table (model × check), then per model: the results,
the lint findings, the per-layer table, attention heatmaps (first sample, per layer × head) and
leak maps (Δ of the output at query i when the input at key j changes; cells above the diagonal
are future positions and must be 0 for a causal model).

Requires matplotlib (``pip install 'attncheck[report]'``); raises ``RuntimeError`` with that hint
when it is missing.
"""
from __future__ import annotations

import base64
import html
import io
import os
from collections.abc import Iterable
from typing import Any

from attncheck.atomic import atomic_write

__all__ = ["render_html", "write_html"]

_COLORS = {"pass": "#1a7f37", "fail": "#cf222e", "error": "#8250df", "warn": "#9a6700", "skip": "#6e7781"}
_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#1f2328;max-width:1200px}
h1{font-size:24px}h2{font-size:20px;border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:36px}
h3{font-size:16px;margin-top:20px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}table.sum td{white-space:nowrap}
.st{font-weight:600;color:#fff;border-radius:4px;padding:1px 6px;display:inline-block;min-width:34px;text-align:center}
.pass{background:#1a7f37}.fail{background:#cf222e}.error{background:#8250df}.warn{background:#9a6700}.skip{background:#6e7781}
.muted{color:#57606a;font-size:12px}code{font-size:12px}
img{max-width:100%;border:1px solid #d0d7de;margin:6px 0}
.num{font-family:ui-monospace,monospace;font-size:12px;color:#57606a}
"""


def _require_mpl():
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except Exception as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError(f"the HTML report needs matplotlib ({exc}); pip install 'attncheck[report]'") from exc
    return plt


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _badge(status: str) -> str:
    return f'<span class="st {html.escape(status)}">{html.escape(status)}</span>'


def _base(check: str) -> tuple[str, str | None]:
    if check.endswith("]") and "[" in check:
        b, v = check[:-1].split("[", 1)
        return b, v
    return check, None


def _summary(reports) -> str:
    cols: list[str] = []
    for r in reports:
        for res in r.results:
            b, _ = _base(res.check)
            if b not in cols:
                cols.append(b)
    rows = []
    for r in reports:
        cells = []
        for c in cols:
            sts = [(v, res.status) for res in r.results for b, v in [_base(res.check)] if b == c]
            if not sts:
                cells.append("<td></td>")
                continue
            cells.append("<td>" + " ".join(_badge(s) for _, s in sts) + "</td>")
        verdict = "pass" if r.ok else "fail"
        link = f'<a href="#{_anchor(r.target)}">{html.escape(r.target)}</a>'
        rows.append(f"<tr><th>{link}</th>"
                    f"<td>{_badge(verdict)}</td>{''.join(cells)}</tr>")
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    return (f"<table class=sum><tr><th>model</th><th>verdict</th>{head}</tr>{''.join(rows)}</table>"
            '<p class="muted">One badge per dispatch variant (e.g. eager, sdpa), '
            "in the order listed under each model.</p>")


def _anchor(s: str) -> str:
    return "m-" + "".join(ch if ch.isalnum() else "-" for ch in s)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def _metrics_short(m: dict[str, Any]) -> str:
    parts = [f"{k}={_fmt(v)}" for k, v in m.items() if not isinstance(v, (dict, list)) and k != "variant"]
    return " ".join(parts[:5])


def _results_table(r) -> str:
    rows = "".join(
        f"<tr><td><code>{html.escape(x.check)}</code></td><td>{_badge(x.status)}</td>"
        f"<td>{html.escape(x.message)}</td><td class=num>{html.escape(_metrics_short(x.metrics))}</td></tr>"
        for x in r.results)
    return f"<table><tr><th>check</th><th>status</th><th>message</th><th>numbers</th></tr>{rows}</table>"


def _lint_table(r) -> str:
    lint = r.extra.get("lint") or {}
    files = lint.get("files") or []
    out = [f'<p class="muted">Linted {len(files)} source file(s): '
           + ", ".join(f"<code>{html.escape(os.path.basename(f))}</code>" for f in files) + "</p>"]
    fs = lint.get("findings") or []
    if fs:
        rows = "".join(f"<tr><td><code>{html.escape(os.path.basename(f['path']))}:{f['line']}</code></td>"
                       f"<td>{html.escape(f['code'])}</td><td>{html.escape(f['severity'])}</td>"
                       f"<td>{html.escape(f['message'])}</td></tr>" for f in fs[:200])
        out.append(f"<table><tr><th>where</th><th>code</th><th>severity</th><th>message</th></tr>{rows}</table>")
    else:
        out.append("<p>No lint findings.</p>")
    return "".join(out)


def _layers_table(r) -> str:
    layers = r.extra.get("layers") or []
    if not layers:
        return "<p>No attention layer observed.</p>"
    keys = ["variant", "layer", "kind", "shape", "pattern", "expected_pattern", "max_row_sum_error",
            "max_weight", "effective_scale", "expected_scale", "kv_heads"]
    head = "".join(f"<th>{k}</th>" for k in keys)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(lay.get(k)) if lay.get(k) is not None else '–')}</td>"
                                    for k in keys) + "</tr>" for lay in layers)
    return f"<table><tr>{head}</tr>{rows}</table>"


def _heatmaps(plt, label: str, maps, max_layers: int = 6, max_heads: int = 8) -> str:
    from matplotlib.colors import PowerNorm

    maps = maps[:max_layers]
    if not maps:
        return ""
    H = min(max(m[2].shape[0] for m in maps), max_heads)
    fig, axes = plt.subplots(len(maps), H, figsize=(1.6 * H + 0.6, 1.7 * len(maps) + 0.4), squeeze=False)
    for r, (idx, kind, probs) in enumerate(maps):
        for h in range(H):
            ax = axes[r][h]
            ax.set_xticks([])
            ax.set_yticks([])
            if h < probs.shape[0]:
                ax.imshow(probs[h], cmap="viridis", norm=PowerNorm(0.5, vmin=0.0, vmax=1.0),
                          interpolation="nearest")
            else:
                ax.axis("off")
            if r == 0:
                ax.set_title(f"head {h}", fontsize=8)
            if h == 0:
                ax.set_ylabel(f"layer {idx}\n{kind}", fontsize=8)
    fig.suptitle(f"{label}: attention weights (sample 0; rows = queries, columns = keys; "
                 "colour ∝ √weight, viridis: dark purple = exactly 0, yellow = 1)", fontsize=9)
    return f'<img alt="attention heatmaps {html.escape(label)}" src="{_png(fig)}">'


def _leakmaps(plt, label: str, leak: dict[str, Any]) -> str:
    if not leak:
        return ""
    import numpy as np

    n = len(leak)
    fig, axes = plt.subplots(1, n, figsize=(3.3 * n + 1.2, 3.4), squeeze=False)
    fig.subplots_adjust(wspace=0.45)
    for ax, (path, d) in zip(axes[0], leak.items()):
        d = np.asarray(d, dtype=float)
        L = d.shape[0]
        shown = np.log10(np.clip(d, 1e-12, None))
        im = ax.imshow(shown, cmap="magma", vmin=-12, vmax=max(1.0, float(shown.max())), interpolation="nearest")
        future = np.triu(np.ones((L, L), dtype=bool), 1)
        leaks = future & (d > 1e-6)
        ys, xs = np.nonzero(leaks)
        ax.scatter(xs, ys, marker="x", color="cyan", s=18, linewidths=1.2)
        ax.plot([-0.5, L - 0.5], [-0.5, L - 0.5], color="white", lw=0.6, ls="--")
        ax.set_title(f"{path}: {int(leaks.sum())} leak(s)", fontsize=8)
        ax.set_xlabel("perturbed key position j", fontsize=7)
        ax.set_ylabel("query position i", fontsize=7)
        ax.tick_params(labelsize=6)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="log10 Δ output")
    fig.suptitle(f"{label}: leak maps (× = output at i changed by a future input j > i)", fontsize=9)
    return f'<img alt="leak maps {html.escape(label)}" src="{_png(fig)}">'


def render_html(reports: Iterable[Any]) -> str:
    """The HTML text for one or several :class:`~attncheck.audit.runner.AuditReport`."""
    plt = _require_mpl()
    reports = list(reports)
    from attncheck._version import __version__

    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>attncheck audit</title>"
             f"<style>{_CSS}</style></head><body>",
             f"<h1>attncheck audit</h1><p class='muted'>attncheck {html.escape(__version__)} — "
             f"{len(reports)} model(s)</p>", "<h2>Summary</h2>", _summary(reports)]
    for r in reports:
        model = r.extra.get("model") or {}
        desc = ", ".join(f"{k}={v}" for k, v in model.items() if v is not None and k != "spec")
        parts.append(f'<h2 id="{_anchor(r.target)}">{html.escape(r.target)} {_badge("pass" if r.ok else "fail")}</h2>')
        parts.append(f'<p class="muted">{html.escape(desc)}; device {html.escape(r.device)}</p>')
        parts.append("<h3>Checks</h3>" + _results_table(r))
        if r.extra.get("lint") is not None:
            parts.append("<h3>Lint (the model's own source)</h3>" + _lint_table(r))
        parts.append("<h3>Attention layers</h3>" + _layers_table(r))
        arrays = getattr(r, "arrays", {}) or {}
        for label, a in arrays.items():
            img = _heatmaps(plt, label, a.get("maps") or [])
            if img:
                parts.append(f"<h3>Attention heatmaps — {html.escape(label)}</h3>{img}")
            img = _leakmaps(plt, label, a.get("leak") or {})
            if img:
                parts.append(f"<h3>Leak maps — {html.escape(label)}</h3>{img}")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_html(reports: Iterable[Any], path: str) -> str:
    """Write :func:`render_html` to ``path`` (UTF-8); return the path."""
    atomic_write(path, render_html(reports))
    return path
