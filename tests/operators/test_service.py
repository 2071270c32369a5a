"""``bridge service``: every generated unit passes ``systemd-analyze verify``; without a running
systemd, install fails with its own exit code while ``--dry-run`` still prints the unit."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from bridgecli import service_units
from tests.support.env import run_bridge

DAEMONS = ("gateway", "hub", "broker")


@pytest.mark.parametrize("scope", ["--user", "--system"])
def test_systemd_analyze_accepts_every_generated_unit(bridge_home, scope, tmp_path):
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: ./dev installs the Debian package systemd"
    env = {**bridge_home.env, "BRIDGE_BROKER_URI": "amqp://bob:s3cret@broker.example/", "BRIDGE_HOST_ID": "h1"}
    for daemon in DAEMONS:
        result = run_bridge("service", "install", daemon, scope, "--dry-run", "--json", env=env)
        assert result.returncode == 0, result.stderr
        unit = json.loads(result.stdout)
        text = unit["text"]
        assert "Restart=on-failure" in text and "s3cret" not in text  # secrets stay in the config file
        assert 'Environment="BRIDGE_HOST_ID=h1"' in text
        exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
        assert Path(exec_start.split("=", 1)[1].split()[0]).is_absolute()
        if scope == "--user":
            assert unit["path"].endswith(f"/systemd/user/bridge-{daemon}.service")
            assert "loginctl enable-linger" in unit["linger"]
        else:
            assert unit["path"] == f"/etc/systemd/system/bridge-{daemon}.service" and "User=" in text
        path = tmp_path / unit["unit"]
        path.write_text(text)
        verify = subprocess.run([analyze, "verify", str(path)], capture_output=True, text=True, timeout=60)
        assert verify.returncode == 0 and unit["unit"] not in verify.stderr, verify.stderr


def test_install_without_systemd_fails_in_one_line_with_its_own_code(bridge_home):
    if service_units.systemd_running():
        pytest.skip("this machine runs systemd: install would really install")
    result = run_bridge("service", "install", "gateway", env=bridge_home.env)
    assert result.returncode == 25, result.stderr  # ExitCode.NO_SYSTEMD
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "systemd is not running" in lines[0] and "--dry-run" in lines[0]
    assert not (Path(bridge_home.env["XDG_CONFIG_HOME"]) / "systemd").exists()
    printed = run_bridge("service", "install", "gateway", "--dry-run", env=bridge_home.env)
    assert printed.returncode == 0 and "[Service]" in printed.stdout and "ExecStart=" in printed.stdout
    status = json.loads(run_bridge("service", "status", "--json", env=bridge_home.env).stdout)
    assert status == {"systemd": False, "units": []}
