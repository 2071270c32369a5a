"""Raises on import, like a plugin with a missing dependency."""

raise RuntimeError("sample breakage on import")
