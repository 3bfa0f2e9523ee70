"""The shared statement executor (attncheck.lint.analysis.interpreter): one join, one loop
policy, calls resolved by value, one inlining depth — observed through both domains."""
from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from attncheck.lint.analysis import masks as M
from attncheck.lint.analysis import provenance as P
from attncheck.lint.analysis.interpreter import MAX_INLINE_DEPTH, Frame, FuncRef
from attncheck.lint.context import FileContext

HEADER = "import functools\nimport math\nimport torch\nimport torch.nn.functional as F\n"


def _ctx(src: str) -> FileContext:
    src = HEADER + textwrap.dedent(src)
    return FileContext(cst.parse_module(src), src, "t.py")


def factors(src: str) -> list[list[str]]:
    """The scale factors of each softmax / SDPA event, as text."""
    return [[f.sym.text() for f in ev.factors] for ev in P.analyze(_ctx(src)).scale_events]


@pytest.mark.parametrize("call", [
    # a local def, a lambda, a partial, a function passed as an argument, map and a comprehension
    "s = scaled(q, k)",
    "s = functools.partial(scaled, q)(k)",
    "s = apply(scaled, q, k)",
    "s = (lambda a, b: scaled(a, b))(q, k)",
    "s = tuple(map(functools.partial(scaled, q), (k,)))[0]",
    "s = [scaled(a, b) for a, b in zip((q,), (k,))][0]",
    "s = scaled(*(q, k))",
])
def test_calls_are_resolved_by_value(call):
    src = f"""
    def apply(fn, a, b):
        return fn(a, b)

    def f(q, k):
        def scaled(a, b):
            return a @ b.transpose(-2, -1) / math.sqrt(a.size(-1))
        {call}
        return s.softmax(dim=-1)
    """
    (ev,) = P.analyze(_ctx(src)).scale_events  # the helper's q·kᵀ reached the softmax ...
    (fac,) = ev.factors  # ... divided by the square root of the head dim
    assert [e for _, e in fac.sym.pows] == [-0.5]


def test_loop_body_is_joined_with_the_state_before_the_loop():
    # the scale applied inside the loop may not have run (zero iterations): the factors are
    # uncertain after the loop, not "scaled once"
    src = """
    def f(q, k, n):
        s = q @ k.transpose(-2, -1)
        for _ in range(n):
            s = s / 8.0
        return s.softmax(dim=-1)
    """
    (ev,) = P.analyze(_ctx(src)).scale_events
    assert ev.uncertain


def test_names_a_loop_does_not_bind_keep_their_facts():
    src = """
    def f(q, k, h, layers):
        s = q @ k.transpose(-2, -1) / 8.0
        for layer in layers:
            h = layer(h)
        return s.softmax(dim=-1)
    """
    assert factors(src) == [["0.125"]]


def test_one_line_suites_run():
    # ``if cond: s = s / 8.0`` on one line is a statement like any other
    src = """
    def f(q, k, cond):
        s = q @ k.transpose(-2, -1)
        if cond: s = s / 8.0
        return s.softmax(dim=-1)
    """
    (ev,) = P.analyze(_ctx(src)).scale_events
    assert ev.uncertain


def _helpers(depth: int) -> str:
    """``h0(m)`` calls ``h1`` ... ``h{depth-1}``, which builds a causal mask."""
    out = []
    for i in range(depth):
        body = (f"return h{i + 1}(n)" if i < depth - 1
                else "return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)")
        out.append(f"def h{i}(n):\n    {body}\n")
    return "\n".join(out)


@pytest.mark.parametrize("depth", [MAX_INLINE_DEPTH, MAX_INLINE_DEPTH + 1])
def test_one_inlining_depth_for_both_domains(depth):
    # masks: a helper chain of MAX_INLINE_DEPTH calls is evaluated, one more is unknown
    src = _helpers(depth) + textwrap.dedent("""
    def f(s, n):
        m = h0(n)
        return s.masked_fill(m, float("-inf")).softmax(-1)
    """)
    uses = [u for u in M.analyze(_ctx(src)).uses if u.consumer == "masked_fill"]
    assert len(uses) == 1
    known = uses[0].blocked is not None
    assert known == (depth <= MAX_INLINE_DEPTH)
    # provenance: a scale applied MAX_INLINE_DEPTH calls down is seen, one more is not
    chain = "\n".join(
        f"def g{i}(s):\n    return {'g%d(s)' % (i + 1) if i < depth - 1 else 's / 8.0'}\n"
        for i in range(depth))
    psrc = chain + "\ndef f(q, k):\n    return g0(q @ k.transpose(-2, -1)).softmax(dim=-1)\n"
    seen = [[f.sym.text() for f in ev.factors] for ev in P.analyze(_ctx(psrc)).scale_events]
    assert seen == ([["0.125"]] if depth <= MAX_INLINE_DEPTH else [])


def test_recursion_is_unknown_not_a_crash():
    src = """
    def g(s, n):
        return g(s / 8.0, n - 1) if n else s

    def f(q, k):
        return g(q @ k.transpose(-2, -1), 3).softmax(dim=-1)
    """
    assert len(P.analyze(_ctx(src)).scale_events) == 1


class _Const(Frame):
    """A toy domain: integer literals, everything else unknown (``None``)."""

    def eval(self, node):
        return int(node.value) if type(node) is cst.Integer else None

    def assign(self, target, value, value_node=None):
        if type(target) is cst.Name:
            self.env[target.value] = value


def _run_toy(body: str) -> dict:
    fn = cst.parse_module(textwrap.dedent(body)).body[0]
    fr = _Const({})
    fr.exec_block(fn.body)
    return fr.env


def test_join_keeps_agreeing_values_and_drops_disagreeing_ones():
    env = _run_toy("""
    def f(c):
        a = 1
        if c:
            b = 2
            x = 1
        else:
            b = 3
            x = 1
        while c:
            a = 1
    """)
    assert env == {"a": 1, "b": None, "x": 1}


def test_partial_prepends_arguments():
    ref = FuncRef("f").partial([1], {"k": 2})
    assert ref.call_args([3], {"j": 4}) == ([1, 3], {"k": 2, "j": 4})


@pytest.mark.parametrize("diagonal, blocks_upper", [(1, True), (0, False)])
def test_mask_from_a_local_def_is_evaluated(diagonal, blocks_upper):
    src = f"""
    def f(s, n):
        def causal(size):
            return torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal={diagonal})
        m = causal(n)
        return s.masked_fill(m, float("-inf")).softmax(-1)
    """
    (use,) = [u for u in M.analyze(_ctx(src)).uses if u.consumer == "masked_fill"]
    # triu(diagonal=1) blocks exactly the future (a causal mask); diagonal=0 also the diagonal
    assert use.blocked == (False, not blocks_upper, True)


def test_a_local_def_sees_names_bound_after_it():
    # closures bind late: ``scale`` is assigned after the def, after an ``if`` and a loop
    src = """
    def f(q, k, c, layers, h):
        def scores(a, b):
            return a @ b.transpose(-2, -1) * scale
        if c:
            h = h + 1
        for layer in layers:
            h = layer(h)
        scale = 0.125
        return scores(q, k).softmax(dim=-1)
    """
    assert factors(src) == [["0.125"]]


@pytest.mark.parametrize("call", [
    # the forms of test_calls_are_resolved_by_value, in the mask domain, plus starred unpacking
    "m = causal(n)",
    "m = functools.partial(causal, n)()",
    "m = apply(causal, n)",
    "m = (lambda a: causal(a))(n)",
    "m = tuple(map(functools.partial(causal), (n,)))[0]",
    "(m,) = map(causal, (n,))",
    "m = [causal(a) for a in (n,)][0]",
    "m, *_ = [causal(a) for a, b in zip((n,), (n,))]",
    "*_, m = list(causal(a) for a in (n, n))",
    "m = causal(*(n,))",
    "make = lambda a: causal(a)\n        m = make(n)",
    "make = functools.partial(apply, causal)\n        m = make(n)",
])
@pytest.mark.parametrize("d, blocks_diagonal", [(1, False), (0, True)])
def test_mask_calls_are_resolved_by_value(call, d, blocks_diagonal):
    src = f"""
    def apply(fn, a):
        return fn(a)

    def f(s, n):
        def causal(size):
            return torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal={d})
        {call}
        return s.masked_fill(m, float("-inf")).softmax(-1)
    """
    (use,) = [u for u in M.analyze(_ctx(src)).uses if u.consumer == "masked_fill"]
    # triu(diagonal=1) blocks exactly the future (a causal mask); diagonal=0 also the diagonal
    assert use.blocked == (False, blocks_diagonal, True)


@pytest.mark.parametrize("call", ["fn = self.causal\n            m = fn(n)",
                                  "(m,) = map(self.causal, (n,))",
                                  "m = functools.partial(self.causal)(n)"])
def test_mask_method_is_called_by_value(call):
    src = f"""
    class Attention:
        def causal(self, size):
            return torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal=0)

        def forward(self, s, n):
            {call}
            return s.masked_fill(m, float("-inf")).softmax(-1)
    """
    (use,) = [u for u in M.analyze(_ctx(src)).uses if u.consumer == "masked_fill"]
    assert use.blocked == (False, True, True)  # triu(diagonal=0) also blocks the diagonal


@pytest.mark.parametrize("body, expected", [
    # every path returned: what follows is not run
    ("return s.softmax(dim=-1)\n        s = s / 8.0", [[]]),
    ("if n:\n            return s.softmax(dim=-1)\n        else:\n            raise ValueError(n)\n"
     "        s = s / 8.0", [[]]),
    ("raise ValueError(s)\n        s = s / 8.0", []),
    # one path only: the rest runs
    ("if n:\n            return s.softmax(dim=-1)\n        s = s / 8.0", [[], ["0.125"]]),
    # a return in a loop ends the loop's iteration only
    ("for _ in range(n):\n            return s.softmax(dim=-1)\n        s = s / 8.0", [[], ["0.125"]]),
    ("try:\n            return s.softmax(dim=-1)\n        except ValueError:\n            pass\n"
     "        s = s / 8.0", [[], ["0.125"]]),
])
def test_statements_after_a_return_on_every_path_are_not_run(body, expected):
    src = f"""
    def f(q, k, n):
        s = q @ k.transpose(-2, -1)
        {body}
        return s.softmax(dim=-1)
    """
    assert factors(src) == expected


def test_replace_equals_dataclasses_replace() -> None:
    """The analyses' ``replace`` copies the instance dictionary of plain value classes and falls
    back to ``dataclasses.replace`` where ``__init__`` does more than store the fields."""
    import dataclasses

    from attncheck.lint.analysis.interpreter import replace
    from attncheck.lint.analysis.masks import Fill, MaskVal
    from attncheck.lint.analysis.provenance import Tensor

    for obj, changes in [(Tensor(rank=3, scores=True), {"rank": 4, "key_axis": -1}),
                         (MaskVal(("Z", "Z", "N"), "float"), {"polarity": "keep"}),
                         (Fill("literal", -1e9), {"wide": True})]:
        got, want = replace(obj, **changes), dataclasses.replace(obj, **changes)
        assert got == want and hash(got) == hash(want) and got is not obj
        assert vars(got) == vars(want)
        assert vars(obj) != vars(got)  # the original is unchanged

    @dataclasses.dataclass(frozen=True)
    class Derived:
        a: int
        b: int = dataclasses.field(init=False, default=0)

        def __post_init__(self) -> None:
            object.__setattr__(self, "b", self.a * 2)

    assert replace(Derived(1), a=5).b == 10
