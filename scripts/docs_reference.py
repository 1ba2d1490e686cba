"""The generated parts of the docs site, rendered from kernlock's own source so that they cannot drift.

`mkdocs build` calls `on_page_markdown` (mkdocs.yml `hooks:`), which replaces four markers
(and `on_page_content`, which blanks the "no default" sentinel mkdocs-click prints for click 8.2):

    <!-- generated: env-vars -->     every environment variable kernlock reads: the names and meanings of
                                     `kernlock/_internal/settings.py`, and every other read found in the package's AST
    <!-- generated: cli-commands --> one row per command: `kernlock --help`'s one-line summary (the CLI's `COMMANDS`),
                                     linking to the page's `{ #name }` section (a missing one fails `--strict`)
    <!-- generated: config-keys -->  every `[tool.kernlock]` key the project reader accepts (`_KNOWN_KEYS`),
                                     with its default as the reader's `config.get(key, default)` gives it
    <!-- generated: python-api -->   `kernlock.__all__`, each name with the first line of its docstring

The words that source cannot give (what a `[tool.kernlock]` key means, what a variable read outside
settings.py means) are in `KEYS` and `OTHER_VARIABLES` below, and rendering fails, failing
`mkdocs build --strict` and tests/integration/docs/test_docs_site.py, when a key or a variable exists on one side only.

Each table is wrapped in a `kernlock-names` block, whose first column docs/stylesheets/kernlock.css keeps unbroken.

    python scripts/docs_reference.py env-vars|cli-commands|config-keys|python-api   # print one table
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kernlock"

# What each `[tool.kernlock]` key means; the keys must be exactly the reader's `_KNOWN_KEYS`.
KEYS = {
    "kernels": ("list of specs", "the kernels to lock (`org/repo`, `org/repo@rev`, an alias; see [Specs](specs-and-targets.md))"),
    "recorded": ("list of specs", "the kernels `kernlock lock --record -- CMD` saw CMD load; locked like "
                 "`kernels`, their entries marked `source = \"recorded\"` ([CLI](cli.md#record))"),
    "models": ("list of paths or Hub ids", "models whose default-kernelized layers are locked, for GPU targets "
               "([how-to](../how-to/models.md))"),
    "targets": ("list of targets", "the environments the lock must cover; without it, the machine that locks"),
    "trust": ("list of repos", "kernels to lock although the Hub does not mark their publisher trusted"),
    "scan": ("list of paths", "files and directories whose `attn_implementation` values (and models) are read"),
    "use-kernels": ("boolean or list of repos", "also lock every repo (or these repos) of Transformers' kernel mapping"),
    "lockfile": ("path", "the lock's path, inside the project"),
    "overrides": ("table", "per-target pins ([how-to](../how-to/overrides.md))"),
    "allow-mixed-variants": ("boolean", "let the ranks of one job load different variants of the same commits"),
    "require-signatures": ("boolean", "refuse unsigned variants and signers no policy entry allows "
                           "([how-to](../how-to/signatures.md))"),
    "sigstore-trusted-root": ("path", "the Sigstore `trusted_root.json` to verify against, relative to the project"),
    "signers": ("table: repo or glob → list of signer URIs", "which build workflows may sign which repos"),
    "gpu-archs": ("list, or table: target glob → list", "the GPU architectures the targets run on, checked by "
                  "`verify` ([how-to](../how-to/gpu-archs.md))"),
    "advisories": ("list of paths or https:// URLs", "advisory files of known-bad builds "
                   "([how-to](../how-to/advisories.md))"),
    "exclude-newer": ("date or duration", "skip Hub commits newer than this cut-off: an RFC 3339 date, or a duration "
                      "back from the time of locking such as `\"7 days\"` or `\"P7D\"`; `kernlock outdated` reports a newer "
                      "head as held back ([how-to](../how-to/cooldown.md))"),
    "exclude-newer-kernel": ("table: repo → date or duration", "a cut-off of its own for a repo, in place of "
                             "`exclude-newer`"),
    "groups": ("table: group → list of specs", "named groups of kernels, locked into the one lock; `sync`, `verify`, "
               "`run`, `vendor` and `tree` take `--group` to act on one group and the ungrouped kernels, "
               "`remove --group` removes a spec from one group ([how-to](../how-to/groups.md))"),
    "ignore-advisories": ("list of ids or `{ id, until, reason }` tables", "advisories set aside through their "
                          "`until` day; an expired one fails `verify` "
                          "([how-to](../how-to/advisories.md#ignore-an-advisory-for-a-while))"),
}

# Variables kernlock reads that are not named in settings.py: what each means (must match the reads found).
OTHER_VARIABLES = {
    "KERNLOCK_SIGSTORE_TRUSTED_ROOT": "the Sigstore `trusted_root.json` to verify signatures against, when "
                                      "`[tool.kernlock] sigstore-trusted-root` is not set",
    "HF_HUB_ETAG_TIMEOUT": "connect/read timeout of Hub API calls and metadata requests (huggingface_hub's variable)",
    "HF_HUB_DOWNLOAD_TIMEOUT": "connect/read timeout of file downloads (huggingface_hub's variable)",
    "KERNELS_CACHE": "the Hub cache kernels downloads into; kernlock reads and fills the same one",
    "HF_HUB_CACHE": "the Hub cache, when `KERNELS_CACHE` is unset",
    "HUGGINGFACE_HUB_CACHE": "the Hub cache's older name, when neither of the above is set",
    "HF_HOME": "`$HF_HOME/hub` is the Hub cache when none of the above is set",
    "XDG_CACHE_HOME": "`$XDG_CACHE_HOME/kernlock` is kernlock's private cache when `KERNLOCK_CACHE_DIR` is unset "
                      "(else `~/.cache/kernlock`), and the base of the default Hub cache when `HF_HOME` is unset",
    "XDG_STATE_HOME": "`$XDG_STATE_HOME/kernlock` holds the per-user lock files when `KERNLOCK_STATE_DIR` is unset "
                      "(else `~/.local/state/kernlock`)",
    "PYTHONPATH": "`kernlock run` puts its start-up directory first and keeps the rest",
    "DOCKER_CONFIG": "the directory of the Docker/ORAS `config.json` whose registry credentials `vendor --to` and "
                     "`sync --from` use (default `~/.docker`)",
    "HF_HUB_DISABLE_TELEMETRY": "read by the compatibility doctor: with kernels 0.17 and huggingface_hub 2.4+ it "
                                "breaks unlocked kernels requests unless `HF_HUB_USER_AGENT_ORIGIN` is set",
    "HF_HUB_USER_AGENT_ORIGIN": "read by the compatibility doctor (see `HF_HUB_DISABLE_TELEMETRY`)",
}

READERS = {"flag": "boolean", "seconds": "seconds", "path": "path", "text": "text", "env_path": "path"}


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _defining(marker: str) -> Path:
    """The one module of the package that assigns `marker` at its top (found by text, so a move is followed)."""
    found = [p for p in sorted(PACKAGE.rglob("*.py")) if f"\n{marker} = " in p.read_text(encoding="utf-8")]
    if len(found) != 1:
        raise RuntimeError(f"docs reference: expected one module assigning {marker}, found {found}")
    return found[0]


def _comments(source: str) -> dict[int, str]:
    return {tok.start[0]: tok.string.lstrip("# ").strip()
            for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT}


def settings_variables() -> tuple[Path, dict[str, tuple[str, str]]]:
    """settings.py's path and its `NAME_ENV = "VARIABLE"  # meaning` constants: constant -> (variable, meaning).

    The meaning is the comment on the assignment's lines (the formatter may wrap it into parentheses), else the
    comment line right above it."""
    path = _defining("APPLY_ENV")
    source = path.read_text(encoding="utf-8")
    comments = _comments(source)
    found: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.endswith("_ENV") and isinstance(node.value, ast.Constant)):
            lines = range(node.lineno, (node.end_lineno or node.lineno) + 1)
            meaning = next((comments[n] for n in lines if n in comments), "") or comments.get(node.lineno - 1, "")
            found[node.targets[0].id] = (node.value.value, meaning)
    return path, found


def _literal(node: ast.AST, constants: dict[str, object]) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    return None


def _imported_default(path: Path, node: ast.AST) -> str:
    """A default that is not a literal of the reading module: a name it imports, or huggingface_hub's."""
    import importlib

    text = ast.unparse(node)
    if text.startswith("constants."):
        return f"huggingface_hub's (`{text}`)"
    value = getattr(importlib.import_module(_module_name(path)), text, None) if isinstance(node, ast.Name) else None
    return f"{value:g}" if isinstance(value, float) else f"`{text}`" if value is None else str(value)


# one walk over each module's AST that handles every form of read (settings' names, os.environ, getenv, defaults)
# in place: split up, the pieces would share `names`, `settings` and `reads` through arguments
def environment_reads() -> dict[str, dict[str, set[str]]]:  # noqa: C901
    """Every environment variable the package reads: variable -> {"kinds", "defaults"}."""
    settings_path, settings = settings_variables()
    settings_module = _module_name(settings_path)
    reads: dict[str, dict[str, set[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names: dict[str, object] = {}  # module-level string/number constants and settings' names imported here
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == settings_module:
                for alias in node.names:
                    if alias.name in settings:
                        names[alias.asname or alias.name] = settings[alias.name][0]
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                value = _literal(node.value, names)
                if isinstance(value, (str, int, float, bool)):
                    names[node.targets[0].id] = value
        if path == settings_path:
            names.update({constant: variable for constant, (variable, _) in settings.items()})

        def variable_of(node: ast.AST) -> str | None:  # called within this iteration: `names` is this module's
            if isinstance(node, ast.Attribute) and node.attr in settings:  # settings.MUTEX_TIMEOUT_ENV
                return settings[node.attr][0]
            value = _literal(node, names)  # noqa: B023
            return value if isinstance(value, str) and value.isupper() and " " not in value else None

        def note(variable: str, kind: str, default: str | None) -> None:
            entry = reads.setdefault(variable, {"kinds": set(), "defaults": set()})
            entry["kinds"].add(kind)
            if default is not None:
                entry["defaults"].add(default)

        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                environ = (isinstance(func, ast.Attribute) and name in ("get", "getenv")
                           and ast.unparse(func.value) in ("os.environ", "os", "env", "source"))
                variable = variable_of(node.args[0])
                if variable is None:
                    continue
                if name in READERS and not environ:
                    default = None
                    if len(node.args) > 1:
                        value = _literal(node.args[1], names)
                        default = (("on" if value else "off") if isinstance(value, bool) else f"{value:g}"
                                   if isinstance(value, float) else None if value is None else str(value))
                        if value is None:
                            default = _imported_default(path, node.args[1])
                    note(variable, READERS[name], default)
                elif environ and ast.unparse(func.value) in ("os.environ", "os"):
                    note(variable, "text", None)
            elif (isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ"
                  and isinstance(node.ctx, ast.Load)):
                variable = variable_of(node.slice)
                if variable is not None:
                    note(variable, "text", None)
    return reads


def _names_table(rows: list[str]) -> str:
    """A Markdown table in a `kernlock-names` block: its first column (names) never wraps (docs/stylesheets)."""
    return '<div class="kernlock-names" markdown>\n\n' + "\n".join(rows) + "\n\n</div>"


def env_vars() -> str:
    """The environment variables table (Markdown)."""
    _, settings = settings_variables()
    reads = environment_reads()
    meaning = dict(settings.values())
    other = sorted(set(reads) - set(meaning))
    if set(other) != set(OTHER_VARIABLES):
        raise RuntimeError("docs reference: variables read outside settings.py and OTHER_VARIABLES in "
                           f"scripts/docs_reference.py differ: read but undocumented {sorted(set(other) - set(OTHER_VARIABLES))}, "
                           f"documented but not read {sorted(set(OTHER_VARIABLES) - set(other))}")
    unread = sorted(set(meaning) - set(reads))
    if unread:
        raise RuntimeError(f"docs reference: settings.py names variables nothing reads: {unread}")
    rows = ["| variable | read as | default | meaning |", "| --- | --- | --- | --- |"]
    for variable in [v for v, _ in settings.values()] + other:
        entry = reads[variable]
        kinds = ", ".join(sorted(entry["kinds"]))
        defaults = ", ".join(sorted(entry["defaults"])) or "unset"
        text = meaning.get(variable) or OTHER_VARIABLES[variable]
        rows.append(f"| `{variable}` | {kinds} | {defaults} | {text} |")
    return (f"kernlock's {len(meaning)} settings first, then the {len(other)} variables it reads elsewhere; this "
            f"table is generated from the source by `scripts/docs_reference.py` at build time.\n\n" + _names_table(rows))


def cli_commands() -> str:
    """The CLI reference's "At a glance": each command, linked to its section, with its `--help` summary (Markdown)."""
    import importlib

    commands = importlib.import_module(_module_name(_defining("COMMANDS"))).COMMANDS
    rows = ["| command | what it does |", "| --- | --- |"]
    for name, summary in commands.items():
        rows.append(f"| [`kernlock {name}`](#{name}) | " + summary.replace("|", r"\|") + " |")
    return _names_table(rows)


def config_keys() -> str:
    """The `[tool.kernlock]` keys table (Markdown)."""
    import importlib

    path = _defining("_KNOWN_KEYS")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module = importlib.import_module(_module_name(path))
    known = set(module._KNOWN_KEYS)
    if known != set(KEYS):
        raise RuntimeError(f"docs reference: [tool.kernlock] keys in {path.name} and KEYS in scripts/docs_reference.py "
                           f"differ: undocumented {sorted(known - set(KEYS))}, unknown {sorted(set(KEYS) - known)}")
    defaults: dict[str, str] = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and ast.unparse(node.func.value) == "config" and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value in known):
            default = node.args[1] if len(node.args) > 1 else None
            value = (None if default is None else default.value if isinstance(default, ast.Constant)
                     else getattr(module, default.id) if isinstance(default, ast.Name) else ast.literal_eval(default))
            defaults[node.args[0].value] = _toml(value)
    rows = ["| key | takes | default | meaning |", "| --- | --- | --- | --- |"]
    for key in sorted(known):
        kind, text = KEYS[key]
        rows.append(f"| `{key}` | {kind} | {defaults.get(key, 'none')} | {text} |")
    return (f"The {len(known)} keys the project reader accepts (any other key is an error naming the known ones); "
            "generated from the source by `scripts/docs_reference.py` at build time.\n\n" + _names_table(rows))


def _toml(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, (list, tuple, dict)) and not value:
        return "`[]`" if not isinstance(value, dict) else "`{}`"
    return f"`{value!r}`"


def python_api() -> str:
    """`kernlock.__all__`, each with its kind and the first line of its docstring (Markdown)."""
    import inspect

    import kernlock

    rows = ["| name | kind | what it is |", "| --- | --- | --- |"]
    for name in sorted(kernlock.__all__, key=lambda n: (n[0].isupper(), n.lower())):
        if name == "__version__":
            rows.append(f"| `kernlock.__version__` | string | `{kernlock.__version__}` |")
            continue
        obj = getattr(kernlock, name)
        kind = ("exception" if inspect.isclass(obj) and issubclass(obj, BaseException)
                else "class" if inspect.isclass(obj) else "function")
        doc = (inspect.getdoc(obj) or "").split("\n\n", 1)[0].replace("\n", " ").replace("|", "\\|")
        rows.append(f"| `kernlock.{name}` | {kind} | {doc} |")
    return (f"`kernlock.__all__` holds these {len(kernlock.__all__)} names; the table is generated from it at build "
            "time. Anything else under `kernlock.` is internal and may move.\n\n" + _names_table(rows))


GENERATORS = {"env-vars": env_vars, "cli-commands": cli_commands, "config-keys": config_keys, "python-api": python_api}


def render(markdown: str) -> str:
    for name, generate in GENERATORS.items():
        marker = f"<!-- generated: {name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, generate())
    return markdown


def on_page_markdown(markdown: str, page: object, config: object, files: object) -> str:  # mkdocs hook
    return render(markdown)


def on_page_content(html: str, page: object, config: object, files: object) -> str:  # mkdocs hook
    """mkdocs-click 0.9 prints click 8.2's "no default" sentinel as a default; say there is none."""
    return html.replace("<code>Sentinel.UNSET</code>", "<em>none</em>")


if __name__ == "__main__":
    print(GENERATORS[sys.argv[1]]())
