"""What `pip install bridgecli` gets: the built wheel carries the browser extension and the
`bridge` script.

`bridge browser extension-path` points users at package data; an editable install reads the
source tree, so only a real wheel shows whether pyproject's package-data globs ship it.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTENSION = ROOT / "bridgecli" / "browser" / "extension"


def _can_build_wheels_offline() -> bool:
    """setuptools builds wheels by itself from 70.1 on; older ones need the wheel package."""
    return (
        importlib.util.find_spec("setuptools.command.bdist_wheel") is not None
        or importlib.util.find_spec("wheel") is not None
    )


def test_the_wheel_ships_the_browser_extension(tmp_path):
    # Build from a copy: an in-tree build would leave build/ and egg-info in the checkout.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "scripts", src / "scripts")
    shutil.copytree(
        ROOT / "bridgecli", src / "bridgecli", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "config.json")
    )
    isolation = ["--no-build-isolation"] if _can_build_wheels_offline() else []
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation, "-w", str(tmp_path / "dist"), str(src)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = (tmp_path / "dist").glob("bridgecli-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())

    shipped = {
        f"bridgecli/browser/extension/{p.name}" for p in EXTENSION.iterdir() if p.is_file() and p.name != "config.json"
    }  # config.json: test provisioning only
    assert "bridgecli/browser/extension/manifest.json" in shipped
    assert {n for n in shipped if n.endswith(".js")} >= {
        "bridgecli/browser/extension/background.js",
        "bridgecli/browser/extension/actions.js",
        "bridgecli/browser/extension/page.js",
    }
    missing = sorted(shipped - names)
    assert not missing, f"the wheel lacks extension files: {missing}"
    assert "bridgecli/py.typed" in names
    # the `bridge` command, as written: pip's generated wrapper would import re on every call
    (script,) = [n for n in names if n.endswith(".data/scripts/bridge")]
    lines = zipfile.ZipFile(wheel).read(script).decode().splitlines()
    assert lines[0] == "#!python" and "import re" not in lines

    # the shipped manifest is the one whose key pins the extension id users allow-list
    from bridgecli.cli.browser_exec import extension_id

    unpacked = tmp_path / "unpacked"
    zipfile.ZipFile(wheel).extractall(unpacked)
    assert extension_id(unpacked / "bridgecli" / "browser" / "extension") == extension_id()
