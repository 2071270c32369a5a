"""docs/mcp.md documents every tool with its exact schema and description."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bridgecli.mcp import messaging_tools
from bridgecli.mcp.link import GatewayLink
from bridgecli.mcp.tools import ToolRegistry

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"


def test_every_tool_and_schema_is_documented():
    text = DOC.read_text()
    registry = ToolRegistry()
    messaging_tools.register(registry, GatewayLink())
    for tool in registry:
        section = re.search(rf"### `{tool.name}` — [^\n]*\n\n(.*?)\n\n```json\n(.*?)\n```", text, re.S)
        assert section, f"{tool.name} is not documented in docs/mcp.md"
        assert section.group(1) == tool.description, f"{tool.name}: description differs from the code"
        assert json.loads(section.group(2)) == tool.input_schema, f"{tool.name}: schema differs from the code"
