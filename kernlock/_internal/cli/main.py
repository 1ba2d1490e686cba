"""The `kernlock` command line: a thin shell over the library API.

Each command lives in `kernlock/_internal/cli/commands/<name>.py` and is imported only when
it runs, so `kernlock verify` starts fast; their shared options and error
handling are in `kernlock/_internal/cli/options.py`.
"""

from __future__ import annotations

import importlib

import click

COMMANDS = {
    "lock": "Resolve kernel specs and write kernels.lock.",
    "remove": "Remove kernel specs from the project and re-lock.",
    "run": "Run a command with the lock applied in every Python process.",
    "verify": "Check kernels.lock: valid, fresh, covering the targets (and cached, on the Hub).",
    "show": "Show what kernels.lock pins: spec, ref, commit, variant per target.",
    "outdated": "List locked kernels whose branch moved or that have a newer version.",
    "explain": "Explain the variant choice of a locked kernel for a target.",
    "tree": "Show every locked kernel, per target, under what brought it in.",
    "why": "Say what brought a locked kernel into the lock.",
    "export": "Export kernels.lock in another tool's format (kernels' JSON lock, CycloneDX SBOM).",
    "sync": "Download and verify exactly the locked variants.",
    "vendor": "Export the locked variants into a self-contained directory.",
    "cache": "Show and free what registered locks keep in the Hub cache.",
}


class LazyGroup(click.Group):
    """A group that imports a command's module only when that command is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module = importlib.import_module(f"kernlock._internal.cli.commands.{name}")
        return getattr(module, f"{name}_command")

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """click's, with a did-you-mean for a misspelled command (`kernlock lok`)."""
        name = args[0] if args else ""
        if args and name not in COMMANDS and not name.startswith("-"):
            from kernlock._internal.project.suggest import close_name

            match = close_name(name, COMMANDS)
            if match is not None:
                ctx.fail(f"No such command '{name}'. Did you mean '{match}'?")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name]) for name in self.list_commands(ctx)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kernlock", prog_name="kernlock")
def main() -> None:
    """Lock Hugging Face Hub kernels to exact commits, build variants and file hashes."""
    from kernlock._internal.runtime.autoapply import disarm

    # kernlock's own commands never apply the lock at start-up (KERNLOCK_APPLY=1 may be set)
    disarm()
    from kernlock._internal.compat.tested import untested_versions

    untested = untested_versions()
    if untested is not None:  # once per command, on stderr: a warning, not a refusal
        click.echo(f"kernlock: warning: {untested}", err=True)
