"""The message ids of a send: given (``--id``), minted once per command, or derived from a key.

A retry is safe when it carries the id of the try before it: the receiving gateway drops ids
it has seen (docs/protocol.md#3-receiving-consume-and-hold-dedup-dead-letters). So ``bridge
send`` fixes its ids before the first try (:func:`mint_id`, :func:`mint_key`), and ``--key``
derives them from the sender and KEY (:func:`keyed_id`): a script running the command again
sends the same ids too. Imported by the fast path: only ``os`` at import.
"""

from __future__ import annotations

import os

#: the longest KEY
MAX_KEY_CHARS = 128
#: what a KEY may contain besides ASCII letters and digits (the dash last: a regex class can take it)
KEY_PUNCTUATION = "_.:@/+=-"
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" + KEY_PUNCTUATION)
_HEX = frozenset("0123456789abcdef")
#: the UUID5 namespace of keyed message ids (fixed forever: changing it changes every keyed id)
KEY_NAMESPACE = "6f3b1c2e-8d4a-5b7e-9c1f-2a6d4e8b0c35"


def is_uuid(text: str) -> bool:
    """Whether lower-case ``text`` is a canonical UUID, without the ``re`` and ``uuid``
    imports :func:`bridgecli.envelope.is_uuid` costs the fast path."""
    parts = text.split("-")
    return [len(part) for part in parts] == [8, 4, 4, 4, 12] and all(c in _HEX for part in parts for c in part)


def key_problem(key: object, new_id: object = None) -> tuple[str, str] | None:
    """Why ``key`` (with ``new_id``, the ``--id``) cannot be a send's key, as ``(message,
    hint)``; None when it can (or no key is given)."""
    if key is None:
        return None
    if new_id is not None:
        return "--key and --id cannot be combined", "pass one: --key derives the message id, --id gives it"
    if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_CHARS or not set(key) <= _KEY_CHARS:
        shown = str(key)[:40]
        return (
            f"bad --key {shown!r}: a key is 1-{MAX_KEY_CHARS} ASCII letters, digits and {KEY_PUNCTUATION}",
            "pass a key such as job-42",
        )
    return None


def mint_id() -> str:
    """A fresh random message id (UUID4 text), for the tries of one command."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def mint_key() -> str:
    """A fresh random key, for the tries of one bulk command (whose ids are derived)."""
    return os.urandom(16).hex()


def keyed_id(sender: str, key: str, index: int | None = None) -> str:
    """The message id ``sender`` (a gid) sends under ``key``: the same for every try, process
    and host; ``index`` numbers the lines of a bulk send. UUID5, so it is a valid msgId."""
    import uuid

    name = f"{sender.lower()}\n{key}" if index is None else f"{sender.lower()}\n{key}\n{index}"
    return str(uuid.uuid5(uuid.UUID(KEY_NAMESPACE), name))
