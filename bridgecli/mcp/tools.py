"""A protocol-free tool registry: what a tool is, and how a call becomes a result.

Free of the MCP SDK, so a tool set is plain data plus async functions (unit-testable), and
tool sets (messaging, browser) register through :meth:`ToolRegistry.add` without knowing each
other; :mod:`bridgecli.mcp.server` turns :class:`ToolResult` into ``CallToolResult``. Errors:
a :class:`~bridgecli.errors.BridgeError` becomes ``ToolResult(is_error=True)`` with its one
line (message — hint); arguments are checked against the schema first; an unexpected
exception is logged with its traceback on stderr and the model gets one line saying so.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bridgecli.errors import BridgeError

logger = logging.getLogger("bridgecli.mcp")

Handler = Callable[[dict[str, Any]], Awaitable["ToolResult"]]


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A tool's input schema: an object of ``properties``, the ``required`` ones, and nothing
    else (a model that makes up an argument gets an error, not a silent ignore)."""
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns: text for the model, and the same facts as structured data."""

    text: str
    data: dict[str, Any] | None = None
    is_error: bool = False
    #: images shown after the text, as (base64 data, MIME type) — e.g. a browser screenshot
    images: tuple[tuple[str, str], ...] = ()

    @classmethod
    def error(cls, exc: BridgeError | str) -> ToolResult:
        return cls(text=str(exc), is_error=True)


@dataclass(frozen=True)
class Tool:
    """One MCP tool: ``input_schema`` is a JSON Schema object (draft 2020-12)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    title: str | None = None
    read_only: bool = False


@dataclass
class ToolRegistry:
    """The tools one server offers, in registration order."""

    tools: dict[str, Tool] = field(default_factory=dict)

    def add(self, tool: Tool) -> None:
        """Add a tool; a duplicate name is a programming error (two sets clashing)."""
        if tool.name in self.tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self.tools[tool.name] = tool

    def __iter__(self):
        return iter(self.tools.values())

    async def call(self, name: str, arguments: dict[str, Any] | None) -> ToolResult:
        """Validate and run one call; never raises."""
        tool = self.tools.get(name)
        if tool is None:
            return ToolResult.error(f"unknown tool {name!r} — available: {', '.join(self.tools)}")
        args = dict(arguments or {})
        problem = schema_problem(tool.input_schema, args)
        if problem:
            return ToolResult.error(f"bad arguments for {name}: {problem}")
        try:
            return await tool.handler(args)
        except BridgeError as exc:
            return ToolResult.error(exc)
        except Exception as exc:  # a bug: full detail to stderr, one line to the model
            logger.exception("tool %s failed", name)
            return ToolResult.error(
                f"internal error in {name}: {type(exc).__name__}: {exc} — this is a "
                "bug in bridge; the details are in the MCP server's stderr log"
            )


def schema_problem(schema: dict[str, Any], args: dict[str, Any]) -> str | None:
    """The first way ``args`` breaks ``schema``, as one line; None when it fits."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    first = errors[0]
    where = ".".join(str(p) for p in first.absolute_path)
    return f"{where}: {first.message}" if where else first.message


def as_json(data: Any) -> str:
    """Compact, readable JSON for tool text (models read it fine; humans too)."""
    return json.dumps(data, indent=2, ensure_ascii=False, default=str)
