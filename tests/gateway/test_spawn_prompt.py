"""`bridge spawn --prompt`: a first prompt travels in the control request and reaches the
spawned command line as one text argument, between real gateways (subprocess launcher)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from bridgecli.agent_kinds import MAX_PROMPT_BYTES
from bridgecli.errors import ExitCode

FAST = {"BRIDGE_ROSTER_INTERVAL": "0.5"}
#: records its arguments in $OUT/<gid>, then idles like an agent
RECORDER = (
    "import json, os, sys, time; "
    "open(os.path.join(os.environ['OUT'], os.environ['BRIDGE_GID']), 'w').write(json.dumps(sys.argv[1:])); "
    "time.sleep(300)"
)


def _profiles(out: Path) -> str:
    command = json.dumps([sys.executable, "-c", RECORDER])
    return f"""
[profiles.argv]
command = {command}
prompt_args = ["--", "{{prompt}}"]
env = {{ OUT = "{out}" }}

[profiles.defaulted]
command = {command}
prompt_args = ["--task={{prompt}}"]
prompt = "from the profile"
env = {{ OUT = "{out}" }}

[profiles.shell]
command = "touch {out}/shell-ran; sleep 300"
prompt_args = ["--", "{{prompt}}"]

[profiles.plain]
command = {command}
env = {{ OUT = "{out}" }}
"""


def _argv(out: Path, gid: str) -> list[str]:
    deadline = time.monotonic() + 15
    while not (out / gid).exists():
        assert time.monotonic() < deadline, "the spawned command never wrote its arguments"
        time.sleep(0.05)
    return json.loads((out / gid).read_text())


def test_a_prompt_reaches_the_command_line_as_text(host_factory, tmp_path) -> None:
    a, b, c = (host_factory(n, extra_env=FAST) for n in ("a", "b", "c"))
    out = tmp_path / "out"
    out.mkdir()
    b.write_config(_profiles(out))
    a.register("main", role="main")
    b.start_gateway(), a.start_gateway()

    # through a's gateway: an option-looking prompt with a terminal escape arrives as inert text
    first = a.bridge_json(
        "spawn", "argv", "-H", b.name, "-l", "p1", "--prompt", "--dangerously-skip-permissions\x1b[2J"
    )
    assert _argv(out, first["gid"]) == ["--", "--dangerously-skip-permissions\u241b[2J"]
    # from c, which runs no gateway (straight to the broker)
    second = c.bridge_json("spawn", "argv", "-H", b.name, "-l", "p2", "-p", "-h")
    assert _argv(out, second["gid"]) == ["--", "-h"]
    # no --prompt: the profile's own, in its --flag= form
    third = a.bridge_json("spawn", "defaulted", "-H", b.name, "-l", "p3")
    assert _argv(out, third["gid"]) == ["--task=from the profile"]
    # a plain spawn is unchanged; twice with no label, each gets a default label of its own
    # (its gid's last digits: the first ones are the host's tag, the same for every entity)
    plain = [a.bridge_json("spawn", "plain", "-H", b.name) for _ in range(2)]
    assert [_argv(out, s["gid"]) for s in plain] == [[], []]
    assert [s["label"] for s in plain] == [f"plain-{s['gid'][-6:]}" for s in plain]


def test_a_prompt_is_refused_where_it_cannot_go_safely(host_factory, tmp_path) -> None:
    a, b = host_factory("a", extra_env=FAST), host_factory("b", extra_env=FAST)
    out = tmp_path / "out"
    out.mkdir()
    b.write_config(_profiles(out))
    b.start_gateway(), a.start_gateway()

    shell = a.bridge("spawn", "shell", "-H", b.name, "--prompt", "hi")
    assert shell.returncode == ExitCode.CONFIG and "through the shell" in shell.stderr
    plain = a.bridge("spawn", "plain", "-H", b.name, "--prompt", "hi")
    assert plain.returncode == ExitCode.CONFIG and "takes no prompt" in plain.stderr
    big = a.bridge("spawn", "argv", "-H", b.name, "--prompt", "x" * (MAX_PROMPT_BYTES + 1))
    assert big.returncode == ExitCode.REJECTED and len(big.stderr.strip().splitlines()) == 1
    assert "16384 byte limit" in big.stderr
    assert not (out / "shell-ran").exists() and list(out.iterdir()) == []


def test_the_target_gateway_bounds_a_prompt_a_hostile_requester_sends(host_factory, tmp_path) -> None:
    """A requester that skips the CLI's own check still meets the target gateway's."""
    a, b = host_factory("a", extra_env=FAST), host_factory("b", extra_env=FAST)
    out = tmp_path / "out"
    out.mkdir()
    b.write_config(_profiles(out))
    b.start_gateway()
    script = (
        "import json, sys\n"
        "from bridgecli import config, control_client\n"
        "from bridgecli.errors import BridgeError\n"
        "payload = {'type': 'spawn', 'profile': 'argv', 'prompt': 'x' * 20000,\n"
        "           'requester': {'host': sys.argv[1], 'gid': None, 'label': None}}\n"
        "try:\n"
        "    control_client.request(config.load(), sys.argv[2], payload, timeout=30)\n"
        "except BridgeError as exc:\n"
        "    print(json.dumps([int(exc.exit_code), exc.message]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, a.name, b.name],
        env=a.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    code, message = json.loads(done.stdout)
    assert code == ExitCode.REJECTED and "byte limit" in message
    assert list(out.iterdir()) == []
