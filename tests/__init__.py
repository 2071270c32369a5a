"""bridge's test suite; mirrors the package layout."""
