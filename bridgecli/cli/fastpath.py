"""Answer a TAB and ``bridge --help`` without importing click, from a cached CLI snapshot.

Importing click costs several times Python's own start-up, and a TAB runs on each keystroke
(docs/decisions/click-free-tab-and-help.md). This module replays click's completion protocol
on the snapshot :mod:`bridgecli.cli.snapshot` records; a snapshot whose recorded mtimes or
key no longer match is rebuilt. Anything not modelled returns ``None`` and click answers
instead, so the output is always click's.
"""

from __future__ import annotations

import os
import sys

from bridgecli import paths, wirejson

TYPE_CHECKING = False  # typing costs a TAB more than this whole module: names for checkers only
if TYPE_CHECKING:
    from typing import Any

CACHE_PREFIX = "cli-snapshot-"
KEEP = 8  # snapshots kept side by side (``bridge`` and ``python -m bridgecli`` differ in sys.path)
FORMAT = 2  # bump when the snapshot's shape changes
MAX_HELP_WIDTH = 100  # CONTEXT_SETTINGS["max_content_width"] of the root group


def cache_file() -> str:
    """Where the snapshot for this :func:`key` is cached (one file per key)."""
    tag = 0x811C9DC5  # 32-bit FNV-1a: stable across processes, and no zlib import on a TAB
    for byte in wirejson.dumps_compact(key()).encode():
        tag = ((tag ^ byte) * 0x01000193) & 0xFFFFFFFF
    return os.path.join(paths.dir_text("cache"), f"{CACHE_PREFIX}{tag:08x}.json")


def key() -> list[Any]:
    """What a snapshot depends on besides files: its format, bridge's version, the
    interpreter, ``sys.path`` and the plugin selection."""
    from bridgecli import __version__

    return [FORMAT, __version__, sys.executable, sys.path, os.environ.get("BRIDGE_LOAD_PLUGINS")]


def _fresh(data: Any) -> bool:
    if not isinstance(data, dict) or data.get("key") != key():
        return False
    try:
        return all(os.stat(path).st_mtime_ns == stamp for path, stamp in data["depends"].items())
    except (OSError, KeyError, AttributeError):
        return False


def load() -> dict[str, Any] | None:
    """The snapshot from the cache if it is still fresh, else a new one (built with click,
    then written to the cache for the next call); None when it cannot be built (a plugin
    command that fails to import: click then answers, and reports it, as it always did)."""
    try:
        with open(cache_file(), encoding="utf-8") as handle:
            data = wirejson.loads(handle.read())
        if _fresh(data):
            return data
    except (OSError, ValueError):
        pass
    from bridgecli.cli import snapshot

    try:
        data = snapshot.build(key())
    except Exception:
        return None
    save(data)
    return data


def save(data: dict[str, Any]) -> None:
    """Write the snapshot atomically; a cache that cannot be written only costs speed."""
    target = cache_file()
    tmp = f"{target}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(wirejson.dumps_compact(data))
        os.replace(tmp, target)
        _prune(os.path.dirname(target))
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _prune(directory: str) -> None:
    """Drop all but the KEEP most recently written snapshots."""
    found = [e for e in os.scandir(directory) if e.name.startswith(CACHE_PREFIX) and e.name.endswith(".json")]
    found.sort(key=lambda e: e.stat().st_mtime_ns, reverse=True)
    for entry in found[KEEP:]:
        try:
            os.unlink(entry.path)
        except OSError:
            pass


# --- bridge --help ------------------------------------------------------------------------


def help_width() -> int:
    """The width click's HelpFormatter uses: terminal columns as ``shutil.get_terminal_size``
    finds them, capped at the root's max_content_width, minus 2, at least 50."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    try:
        lines = int(os.environ["LINES"])
    except (KeyError, ValueError):
        lines = 0
    if columns <= 0 or lines <= 0:
        size = os.terminal_size((80, 24))
        if sys.__stdout__ is not None:
            try:
                size = os.get_terminal_size(sys.__stdout__.fileno())
            except (AttributeError, ValueError, OSError):
                pass
        if columns <= 0:
            columns = size.columns or 80
    return max(min(columns, MAX_HELP_WIDTH) - 2, 50)


def root_help() -> tuple[str, str] | None:
    """(stdout, stderr) of ``bridge --help`` as click prints it, or None when click must
    print it itself (a plugin failed to load: its warning is printed live)."""
    data = load()
    if data is None or not data.get("clean"):
        return None
    width = str(help_width())
    if width not in data["help"]:
        from bridgecli.cli import snapshot

        data["help"][width] = list(snapshot.render_help())
        save(data)
    out, err = data["help"][width]
    return out, err


# --- TAB ---------------------------------------------------------------------------------


def split_arg_string(string: str) -> list[str]:
    """click's ``split_arg_string``: shlex, but a missing closing quote keeps the partial word."""
    if not any(c in string for c in "'\"\\"):  # nothing to unquote: shlex splits on these four
        return [w for w in string.replace("\t", " ").replace("\r", " ").replace("\n", " ").split(" ") if w]
    import shlex

    lex = shlex.shlex(string, posix=True)
    lex.whitespace_split = True
    lex.commenters = ""
    out: list[str] = []
    try:
        out.extend(lex)
    except ValueError:
        out.append(lex.token)
    return out


def completion_args(shell: str) -> tuple[list[str], str]:
    """(complete words after ``bridge``, the word being completed), as click reads them."""
    cwords = split_arg_string(os.environ["COMP_WORDS"])
    if shell == "fish":
        incomplete = os.environ["COMP_CWORD"]
        if incomplete:
            incomplete = split_arg_string(incomplete)[0]
        args = cwords[1:]
        if incomplete and args and args[-1] == incomplete:
            args.pop()
        return args, incomplete
    cword = int(os.environ["COMP_CWORD"])
    args = cwords[1:cword]
    return args, cwords[cword] if cword < len(cwords) else ""


class _Context:
    """The little of click's Context a ``shell_complete`` callback of ours reads."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params


def _complete_value(param: dict[str, Any], params: dict[str, Any], incomplete: str) -> list[Any] | None:
    from bridgecli.cli import complete
    from bridgecli.cli.complete import CompletionItem

    how = param["complete"]
    if how[0] == "callback":
        # only a function of complete.py is ever called: the cache file names it, no module
        callback = getattr(complete, how[1], None)
        if not callable(callback) or how[1].startswith("_"):
            return None
        results = callback(_Context(params), None, incomplete)
        if results and isinstance(results[0], str):
            results = [CompletionItem(c) for c in results]
        return list(results)
    if how[0] == "choice":
        if how[2]:
            return [CompletionItem(c) for c in how[1] if c.startswith(incomplete)]
        return [CompletionItem(c) for c in how[1] if c.lower().startswith(incomplete.lower())]
    if how[0] == "path":
        return [CompletionItem(incomplete, type=how[1])]
    if how[0] == "none":
        return []
    return None


def _complete_command(node: dict[str, Any], incomplete: str) -> list[Any]:
    from bridgecli.cli.complete import CompletionItem

    items = []
    for name, child in (node["commands"] or {}).items():
        if name.startswith(incomplete) and not child["hidden"]:
            items.append(CompletionItem(name, help=child["short_help"]))
    if incomplete and not incomplete[0].isalnum():
        for param in node["params"]:
            if param["option"] and not param["hidden"]:
                items += [
                    CompletionItem(n, help=param["help"])
                    for n in [*param["opts"], *param["secondary_opts"]]
                    if n.startswith(incomplete)
                ]
    return items


def candidates(tree: dict[str, Any], args: list[str], incomplete: str) -> list[Any] | None:
    """What click's completion offers for ``bridge ARGS INCOMPLETE``, or None when this
    case is left to click (see the module docstring)."""
    # click never reads a word starting with a letter or digit as an option; anything else
    # (an option, "--", "-") needs click's parser
    if not all(w[:1].isalnum() for w in args):
        return None
    node = tree
    words = list(args)
    while words and node["commands"] is not None:
        if node["chain"] or words[0] not in node["commands"]:
            return None
        node = node["commands"][words.pop(0)]
    if node["chain"]:
        return None
    arguments = [p for p in node["params"] if not p["option"]]
    if any(p["nargs"] not in (1, -1) for p in arguments) or any(p["nargs"] == -1 for p in arguments[:-1]):
        return None
    if incomplete == "=":
        incomplete = ""
    starts_option = bool(incomplete) and incomplete[0] in node["prefixes"]
    if "=" in incomplete and starts_option:
        return None
    if starts_option:
        return _complete_command(node, incomplete)
    params: dict[str, Any] = {}
    for i, param in enumerate(arguments):
        if param["nargs"] == -1:
            params[param["name"]] = tuple(words[i:])
            return _complete_value(param, params, incomplete)
        if i >= len(words):
            return _complete_value(param, params, incomplete)
        params[param["name"]] = words[i]
    return _complete_command(node, incomplete)


def _format(shell: str, item: Any) -> str:
    if shell == "bash":
        return f"{item.type},{item.value}"
    if shell == "zsh":
        help_ = item.help or "_"
        value = item.value.replace(":", r"\:") if help_ != "_" else item.value
        return f"{item.type}\n{value}\n{help_}"
    if item.help:
        return f"{item.type},{item.value}\t{item.help.replace(chr(10), chr(92) + 'n').replace(chr(9), ' ')}"
    return f"{item.type},{item.value}"


def complete(instruction: str) -> str | None:
    """The text ``_BRIDGE_COMPLETE=INSTRUCTION bridge`` prints, or None to let click answer."""
    shell, _, action = instruction.partition("_")
    if action != "complete" or shell not in ("bash", "zsh", "fish"):
        return None
    args, incomplete = completion_args(shell)
    data = load()
    if data is None:
        return None
    items = candidates(data["tree"], args, incomplete)
    if items is None:
        return None
    return "\n".join(_format(shell, item) for item in items) + "\n"
