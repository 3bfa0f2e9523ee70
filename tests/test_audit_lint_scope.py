"""The audit's lint step counts only findings in the code the audited model reaches."""
import textwrap

import attncheck
from attncheck.audit.runner import reached_lines

SOURCE = textwrap.dedent('''
    import math

    import torch
    import torch.nn as nn


    def attention_weights(q, k):
        head_dim = q.size(-1)
        scores = (q @ k.transpose(-2, -1)) * math.sqrt(head_dim)
        return torch.softmax(scores, dim=-1)


    class Block(nn.Module):
        def __init__(self, d_model=32, num_heads=2):
            super().__init__()
            self.attn = nn.MultiheadAttention(d_model, num_heads, batch_first=True)

        def forward(self, x):
            L = x.size(1)
            mask = torch.tril(torch.ones(L, L, dtype=torch.bool, device=x.device))
            return self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]


    class BlockOK(nn.Module):
        def __init__(self, d_model=32, num_heads=2):
            super().__init__()
            self.attn = nn.MultiheadAttention(d_model, num_heads, batch_first=True)

        def forward(self, x):
            L = x.size(1)
            mask = torch.triu(torch.ones(L, L, dtype=torch.bool, device=x.device), diagonal=1)
            return self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]


    class BlockViaHelper(BlockOK):
        def forward(self, x):
            return attention_weights(x, x) @ x


    def make_bad():
        return Block()


    def make_ok():
        return BlockOK()


    def make_via_helper():
        return BlockViaHelper()
''')


def _lint(tmp_path, factory):
    path = tmp_path / "blocks.py"
    path.write_text(SOURCE)
    rep = attncheck.audit(f"{path}:{factory}", checks=["lint"])
    return rep["lint"], [(f["line"], f["code"]) for f in rep.extra["lint"]["findings"]]


def _line_of(text):
    return SOURCE.splitlines().index(text) + 1


def test_finding_in_a_sibling_class_does_not_fail_the_audited_class(tmp_path):
    res, found = _lint(tmp_path, "make_ok")
    assert res.status == "pass", res.message
    assert found == [] and res.metrics["outside_scope"] == 2   # Block's and the helper's


def test_finding_in_the_audited_class_is_reported(tmp_path):
    res, found = _lint(tmp_path, "make_bad")
    assert res.status == "fail"
    block_line = _line_of("        return self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]")
    assert found == [(block_line, "ATT201")]


def test_finding_in_a_helper_function_the_class_calls_is_reported(tmp_path):
    res, found = _lint(tmp_path, "make_via_helper")
    assert res.status == "fail"
    helper_line = _line_of("    scores = (q @ k.transpose(-2, -1)) * math.sqrt(head_dim)")
    assert found == [(helper_line, "ATT105")]


def test_reached_lines_follow_names_transitively(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import math\nSCALE = math.sqrt(2)\ndef helper():\n    return SCALE\n"
                    "def unused():\n    return 1\nclass A:\n    x = helper()\n")
    assert reached_lines(str(path), [(7, 8)]) == [(1, 1), (2, 2), (3, 4), (7, 8)]
