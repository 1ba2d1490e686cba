"""`kernlock cache list|prune|dir`: what the registered locks keep in the Hub cache, and freeing the
rest."""

from __future__ import annotations

import json

import click

from kernlock._internal.cli.options import handle_errors, json_option


@click.group("cache")
def cache_command() -> None:
    """Show and free what registered locks keep in the Hub cache.

    A lock registers itself when kernlock writes or syncs it; `sync`, `vendor` and `apply()`'s
    downloads leave a ref (refs/kernlock/LOCK/COMMIT) per locked commit, which `hf cache prune`
    keeps.
    """


@cache_command.command("list")
@json_option("Print each registered lock, the commits it keeps and their sizes, as JSON.")
@handle_errors
def list_command(as_json: bool) -> None:
    """List each registered lock, the commits it keeps in the Hub cache, and their size."""
    from kernlock._internal.store.cache_gc import cache_list

    listing = cache_list()
    if as_json:
        click.echo(json.dumps(listing.to_dict(), indent=2))
        return
    click.echo(f"Hub cache: {listing.cache}")
    for keeps in listing.locks:
        state = "" if keeps.live else " (gone: expires at the next `kernlock cache prune`)"
        click.echo(f"{keeps.lock}{state}: {keeps.size} bytes")
        for kept in keeps.kept:
            where = (
                "cached, rooted"
                if kept.rooted
                else "cached, no root"
                if kept.cached
                else "not cached"
            )
            click.echo(f"  {', '.join(kept.specs)} {kept.commit[:12]}: {where}, {kept.size} bytes")
    if not listing.locks:
        click.echo("no lock is registered (a lock registers when kernlock writes or syncs it)")
    if listing.unregistered:
        click.echo(
            f"{len(listing.unregistered)} root(s) of locks not registered here are kept "
            "(another user's, or a registration lost with kernlock's private directory)"
        )


@cache_command.command("prune")
@click.option("--dry-run", is_flag=True, help="Say what would be freed; change nothing.")
@json_option("Print what was freed (freed, kept, unrooted, expired, bytes, warnings) as JSON.")
@handle_errors
def prune_command(dry_run: bool, as_json: bool) -> None:
    """Free the commits kernlock rooted that no registered lock names any more.

    A commit another ref still names (refs/main, kernels' refs/v4, a user's ref, another lock's
    root) only loses its stale root; blobs other cached revisions link stay.
    """
    from kernlock._internal.store.cache_gc import prune

    report = prune(dry_run=dry_run)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
        return
    for line in report.warnings:
        click.echo(f"kernlock: warning: {line}", err=True)
    verb = "would free" if dry_run else "freed"
    for freed in report.freed:
        click.echo(f"{verb} {freed}")
    for kept in report.kept:
        click.echo(f"kept {kept} (another ref names it)")
    for lock in report.expired:
        click.echo(f"the registration of {lock} has expired (the lock is gone)")
    click.echo(
        f"{verb} {len(report.freed)} commit(s), {report.bytes} bytes, in {report.cache}; "
        f"{len(report.unrooted)} stale root(s) {'to remove' if dry_run else 'removed'}"
    )


@cache_command.command("dir")
@json_option("Print the Hub cache and kernlock's registry directory as JSON.")
@handle_errors
def dir_command(as_json: bool) -> None:
    """Print the Hub cache directory the locked variants live in."""
    from kernlock._internal.fs.private import cache_root
    from kernlock._internal.store.hub_cache import hub_cache_dir

    if as_json:
        root = cache_root()
        click.echo(
            json.dumps(
                {"cache": str(hub_cache_dir()), "registry": str(root) if root else None}, indent=2
            )
        )
        return
    click.echo(str(hub_cache_dir()))
