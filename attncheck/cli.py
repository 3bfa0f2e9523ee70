"""Command-line interface (click).  Thin: parse options → call the API → render.

Subcommands: lint, rules, explain (attncheck.lint), check (attncheck.dynamic), audit
(attncheck.audit).  Heavy imports (torch) happen inside the subcommands that need them.
"""
from __future__ import annotations

import errno
import os
import sys

import click

from attncheck._version import __version__


#: Exit status after Ctrl-C (SIGINT), as shells report a process killed by it: 128 + 2.
EXIT_INTERRUPTED = 130

#: errno values of a write that cannot complete (disk or quota full, file too large, I/O error):
#: the output is lost, which is a usage-level error (exit 2), not a finding or a crash.
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


class _Group(click.Group):
    """The ``attncheck`` group: Ctrl-C ends any subcommand with one short line on stderr and
    exit status 130 (click's default prints "Aborted!" and exits 1, which CI cannot tell from
    a lint finding or a failed check).  A report that cannot be written (stdout on a full disk,
    ``--html`` on a full disk) ends it with one line on stderr and exit status 2, as ruff does."""

    def invoke(self, ctx: click.Context):
        try:
            try:
                return super().invoke(ctx)
            finally:
                sys.stdout.flush()  # a buffered report fails here, not at interpreter exit
        except KeyboardInterrupt:
            click.echo("\nattncheck: interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except OSError as exc:
            if exc.errno not in _WRITE_ERRNOS:
                raise
            where = f" {exc.filename}" if exc.filename else ""
            click.echo(f"attncheck: error: cannot write the report{where}: {exc.strerror}",
                       err=True)
            # what is still buffered for stdout would fail again when Python exits
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)
            except (OSError, ValueError):  # io.UnsupportedOperation: stdout is not a file
                pass
            ctx.exit(2)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="attncheck")
def main() -> None:
    """attncheck: lint and test attention code."""


# Subcommands register themselves from their own modules to keep this file small and to keep
# import costs per command: attncheck.lint.cli (lint, rules, explain), attncheck.dynamic.cli
# (check), attncheck.audit.cli (audit).
def _register() -> None:
    import importlib

    for mod in ("attncheck.lint.cli", "attncheck.dynamic.cli", "attncheck.audit.cli"):
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise
            continue
        for cmd in getattr(m, "COMMANDS", ()):
            main.add_command(cmd)


_register()
