"""The command lines of ``bridge send|ask|reply|answer``, as data: one table for both parsers.

The click commands (:mod:`bridgecli.cli.send`) build their options from :data:`COMMANDS` and
the click-free fast path (:mod:`bridgecli.fast_send`) builds its getopt table from the same
entries, so the two cannot drift apart. Click-free by design: only plain tuples here.
"""

from __future__ import annotations


class Option:
    """One option: its spellings, the parameter name it fills, whether it takes a value
    (``kind`` ``"text"`` or ``"duration"``) or is a flag (``kind`` None), and its help."""

    __slots__ = ("flags", "dest", "kind", "metavar", "help", "envvar")

    def __init__(
        self,
        flags: tuple[str, ...],
        dest: str,
        kind: str | None,
        help: str,
        metavar: str | None = None,
        envvar: str | None = None,
    ) -> None:
        self.flags, self.dest, self.kind, self.help = flags, dest, kind, help
        self.metavar, self.envvar = metavar, envvar

    @property
    def takes_value(self) -> bool:
        return self.kind is not None


FROM = Option(
    ("--from",),
    "sender",
    "text",
    metavar="GID|LABEL",
    envvar="BRIDGE_GID",
    help=(
        "Who is sending (default: env BRIDGE_GID; for reply/answer, the entity MSGID was delivered to; "
        "else USER@HOSTID, registered on first use)."
    ),
)
WAIT = Option(
    ("--wait", "-w"),
    "wait",
    "duration",
    metavar="DUR",
    help="Block until the reply arrives (e.g. 30s, 10m) and print it; needs the local gateway.",
)
DELAY = Option(("--delay",), "delay", "duration", metavar="DUR", help="Deliver after DUR (through bridge.delay).")
LINES = Option(
    ("--lines",), "lines", None, help="With MESSAGE '-': send each non-empty stdin line as its own message (bulk mode)."
)
FORCE = Option(("--force",), "force", None, help="Send to a gid even if no gateway announces it in the roster.")
NEW_ID = Option(
    ("--id",),
    "new_id",
    "text",
    metavar="UUID",
    help="Use this message id: resending with the same id after an unclear failure is deduplicated.",
)
KEY = Option(
    ("--key",),
    "key",
    "text",
    metavar="KEY",
    help=(
        "Retry key: the same sender sending with the same KEY sends the same message id, so however often "
        "the command runs, the recipient gets it once while its gateway remembers the id (its last "
        "messaging.dedup_window ids, 100000 by default). KEY: 1-128 ASCII letters, digits and _.:@/+=-."
    ),
)
TURN = Option(("--turn",), "turn", "text", metavar="ID", help="Turn id to correlate a mid-turn exchange.")
JSON = Option(("--json",), "as_json", None, help="Print JSON on stdout.")

#: per command, its options in ``--help`` order
COMMANDS: dict[str, tuple[Option, ...]] = {
    "send": (FROM, WAIT, DELAY, LINES, FORCE, NEW_ID, KEY, TURN, JSON),
    "ask": (FROM, WAIT, FORCE, KEY, TURN, JSON),
    "reply": (FROM, WAIT, KEY, JSON),
    "answer": (FROM, KEY, JSON),
}
#: per command: the parameter names of its two arguments
ARGUMENTS = {
    "send": ("target", "message"),
    "ask": ("target", "question"),
    "reply": ("msg_id", "message"),
    "answer": ("msg_id", "message"),
}


def getopt_table(command: str) -> dict[str, tuple[str, bool]]:
    """``{spelling: (parameter name, takes a value)}`` for ``command``."""
    return {flag: (option.dest, option.takes_value) for option in COMMANDS[command] for flag in option.flags}
