"""Rule base class and registry.

A rule is a :class:`libcst.BatchableCSTVisitor`: the engine parses a file once and runs every
enabled rule in one batched visit (``MetadataWrapper.visit_batched``).  Rules do not re-derive
facts themselves: they ask the shared analyses on ``self.ctx`` (score provenance, mask algebra,
import aliases), which are computed lazily once per file.

Writing a rule::

    @register
    class MissingScale(Rule):
        code = "ATT101"
        name = "missing-scale"
        severity = "error"
        summary = "q·kᵀ reaches softmax with no scaling on any path"
        tokens = ("softmax",)          # prefilter: the file must contain one of these
        pattern = r"softmax|Softmax"   # optional, replaces tokens: where it can report

        def visit_Call(self, node):
            ...
            self.report(node, "scores q @ k.transpose(-2, -1) reach softmax unscaled: "
                              "multiply by head_dim ** -0.5")
"""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import libcst as cst
from libcst.metadata import PositionProvider

from attncheck.lint.finding import Fix, Finding, Severity

if TYPE_CHECKING:
    from attncheck.lint.context import FileContext

_REGISTRY: dict[str, type["Rule"]] = {}

# Modules that define rules; imported by all_rules().  Add new rule modules here.
RULE_MODULES = (
    "attncheck.lint.builtin_rules",
    "attncheck.lint.rules.scale",
    "attncheck.lint.rules.masks",
    "attncheck.lint.rules.softmax",
    "attncheck.lint.rules.heads",
    "attncheck.lint.rules.dropout",
    "attncheck.lint.rules.stability",
    "attncheck.lint.rules.gqa",
    "attncheck.lint.rules.state",
    "attncheck.lint.rules.performance",
)


class Rule(cst.BatchableCSTVisitor):
    """Base class of every lint rule.

    Class attributes: ``code`` (``ATTnnn``, stable), ``name`` (kebab-case), ``severity``
    (``error``/``warning``/``info``), ``default_enabled`` (info rules are off by default),
    ``summary`` (one line), ``tokens`` (substrings, any of which must occur in the file for
    the rule to possibly fire; ``()`` = always run), ``pattern`` (optional regular expression,
    or a tuple of them, that replaces ``tokens`` and must match *inside the function or method* the rule can report
    in, or in a name it mentions that is bound to a match; see :mod:`attncheck.lint.triggers`)
    ``methods`` (optional: the method names the rule can report in, e.g. ``forward``) and
    ``context`` (optional regular expression(s) that must also match in the method or its class;
    with ``context_scope = "unit"`` in the function or method itself); ``pattern_in_code = True``
    ignores matches in comments and docstrings.
    The engine parses only what the enabled rules' triggers select
    (:mod:`attncheck.lint.regions`), so a trigger must over-approximate.
    """

    METADATA_DEPENDENCIES = (PositionProvider,)

    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    severity: ClassVar[Severity] = "error"
    default_enabled: ClassVar[bool] = True
    summary: ClassVar[str] = ""
    tokens: ClassVar[tuple[str, ...]] = ()
    pattern: ClassVar[str | tuple[str, ...] | None] = None
    methods: ClassVar[frozenset[str] | None] = None
    context: ClassVar[str | tuple[str, ...] | None] = None
    context_scope: ClassVar[str] = "class"
    pattern_in_code: ClassVar[bool] = False

    def __init__(self, ctx: "FileContext") -> None:
        super().__init__()
        self.ctx = ctx
        self.findings: list[Finding] = []

    def report(self, node: cst.CSTNode, message: str, fix: Fix | None = None) -> None:
        """Record a finding spanning ``node``."""
        pos = self.get_metadata(PositionProvider, node)
        self.findings.append(
            Finding(
                path=self.ctx.display_path,
                line=pos.start.line + self.ctx.line_offset,
                col=pos.start.column,
                end_line=pos.end.line + self.ctx.line_offset,
                end_col=pos.end.column,
                code=self.code,
                name=self.name,
                severity=self.severity,
                message=message,
                fix=fix,
            )
        )


def register(cls: type[Rule]) -> type[Rule]:
    """Class decorator adding a rule to the registry (codes must be unique)."""
    if not cls.code or not cls.name:
        raise ValueError(f"rule {cls.__name__} needs a code and a name")
    if cls.code in _REGISTRY and _REGISTRY[cls.code] is not cls:
        raise ValueError(f"duplicate rule code {cls.code}")
    _REGISTRY[cls.code] = cls
    return cls


def all_rules() -> dict[str, type[Rule]]:
    """Every registered rule, keyed by code, in code order."""
    import importlib

    for mod in RULE_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:  # a rule family not written yet
            if exc.name != mod:
                raise
    return dict(sorted(_REGISTRY.items()))
