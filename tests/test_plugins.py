"""Third-party plugins exactly as users get them: pip-installed packages with entry points.

The packages under tests/data are built and installed with ``pip install --target`` into a
temp dir that subprocesses see through PYTHONPATH, so the venv itself never changes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest

from bridgecli import plugins
from bridgecli.errors import NotFound, PluginError
from tests.support.env import run_bridge

DATA = Path(__file__).parent / "data"
SAMPLES = ("sample_plugin", "broken_plugin", "misspelt_plugin")


@pytest.fixture(scope="module")
def plugin_site() -> Path:
    """The three test plugin packages, pip-installed into one private target dir."""
    work = Path(tempfile.mkdtemp(prefix="bpl", dir="/tmp"))
    for name in SAMPLES:  # build from copies: pip leaves build/ dirs next to the sources
        shutil.copytree(DATA / name, work / "src" / name)
    target = work / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            *(str(work / "src" / n) for n in SAMPLES),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    yield target
    shutil.rmtree(work, ignore_errors=True)


def _env(home, site: Path, load: str | None) -> dict[str, str]:
    env = {**home.env, "PYTHONPATH": str(site)}
    if load is not None:
        env["BRIDGE_LOAD_PLUGINS"] = load
    return env


def test_installed_plugin_is_listed_with_everything_it_provides(bridge_home, plugin_site):
    result = run_bridge("plugins", "--json", env=_env(bridge_home, plugin_site, "sample"))
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    sample = next(p for p in listing["plugins"] if p["name"] == "sample")
    assert sample["version"] == "1.2.3" and sample["builtin"] is False
    assert sample["hooks"] == [
        "register_browser_targets",
        "register_commands",
        "register_delivery_backends",
        "register_launchers",
        "register_plugin_settings",
        "register_profile_settings",
    ]
    assert sample["provides"] == {
        "commands": ["sample-hello"],
        "backends": ["sample-file"],
        "launchers": ["sample-launcher"],
        "browser_targets": ["sample-browser"],
        "profile_settings": ["sample-launcher"],
        "plugin_settings": ["sample", "sample-broken"],
    }
    builtins = {p["name"] for p in listing["plugins"] if p["builtin"]}
    assert {"hold_backend", "exec_backend", "subprocess_launcher"} <= builtins
    human = run_bridge("plugins", env=_env(bridge_home, plugin_site, "sample"))
    assert "sample 1.2.3 (plugin)" in human.stdout


def test_settings_a_plugin_declares_are_checked_by_bridge_config(bridge_home, plugin_site):
    env = _env(bridge_home, plugin_site, "sample")

    def config(*args: str):
        return run_bridge("config", *args, env=env)

    assert config("set", "plugins.sample.retries", "5").returncode == 0
    assert config("set", "plugins.sample.token", "s3cret").returncode == 0
    assert config("set", "profiles.w.launcher", "sample-launcher").returncode == 0
    assert config("set", "profiles.w.sample_mode", "slow").returncode == 0
    data = tomllib.loads(bridge_home.config_file.read_text())
    assert data["plugins"] == {"sample": {"retries": 5, "token": "s3cret"}}
    assert data["profiles"] == {"w": {"launcher": "sample-launcher", "sample_mode": "slow"}}
    got = json.loads(config("get", "plugins.sample.greeting", "--json").stdout)
    assert got == {"key": "plugins.sample.greeting", "value": "hello", "source": "default"}
    rows = {r["key"]: r for r in json.loads(config("show", "--json").stdout)["settings"]}
    assert rows["plugins.sample.retries"]["value"] == 5
    assert rows["plugins.sample.token"]["value"] == "********"
    assert rows["profiles.w.sample_mode"]["help"] == "How the sample launcher starts."
    for args, code, expected in [
        (("plugins.sample.retries", "many"), 3, "bad value 'many' for plugins.sample.retries — expected an integer"),
        (("plugins.sample.greting", "hi"), 3, "[plugins.sample] has no key 'greting' — did you mean greeting?"),
        (("profiles.w.sample_mode", "medium"), 3, "expected one of fast, slow"),
        (("profiles.w.launcher", "subprocess"), 3, "launcher subprocess does not take key(s) sample_mode"),
        (
            ("plugins.sample-broken.greeting", "hi"),
            10,
            "plugin sample: plugin settings of 'sample-broken': 'bridgecli_sample.impl:NOT_SETTINGS' is not a list",
        ),
    ]:
        proc = config("set", *args)
        assert (proc.returncode, proc.stderr.count("\n")) == (code, 1), proc.stderr
        assert expected in proc.stderr
    assert tomllib.loads(bridge_home.config_file.read_text()) == data
    # without the plugin its table is reported, not silently accepted
    proc = run_bridge("config", "set", "plugins.sample.retries", "1", env=_env(bridge_home, plugin_site, ""))
    assert proc.returncode == 3 and "no installed plugin declares settings [plugins.sample]" in proc.stderr


def test_plugin_command_is_listed_lazily_and_runs(bridge_home, plugin_site):
    env = _env(bridge_home, plugin_site, "sample")
    helptext = run_bridge("--help", env=env)
    assert "sample-hello  Say hello from the sample plugin." in helptext.stdout
    ran = run_bridge("sample-hello", "bob", env=env)
    assert ran.returncode == 0 and ran.stdout == "hello bob from bridgecli-sample\n"
    probe = (
        "import sys; from bridgecli.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('IMPL', 'bridgecli_sample.impl' in sys.modules, file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert "IMPL False" in out.stderr  # registered by name, imported only when run


def test_plugin_that_raises_on_import_does_not_break_help(bridge_home, plugin_site):
    env = _env(bridge_home, plugin_site, "sample,broken")
    result = run_bridge("--help", env=env)
    assert result.returncode == 0
    assert "sample-hello" in result.stdout and "doctor" in result.stdout
    assert "plugin broken failed to load (RuntimeError: sample breakage on import)" in result.stderr
    listing = json.loads(run_bridge("plugins", "--json", env=env).stdout)
    assert listing["failures"] == {"broken": "RuntimeError: sample breakage on import"}
    assert run_bridge("sample-hello", env=env).returncode == 0


def test_load_plugins_switch(bridge_home, plugin_site):
    none = json.loads(run_bridge("plugins", "--json", env=_env(bridge_home, plugin_site, "")).stdout)
    assert all(p["builtin"] for p in none["plugins"]) and none["failures"] == {}
    # distribution names select too
    by_dist = json.loads(run_bridge("plugins", "--json", env=_env(bridge_home, plugin_site, "bridgecli-sample")).stdout)
    assert [p["name"] for p in by_dist["plugins"] if not p["builtin"]] == ["sample"]
    gone = run_bridge("sample-hello", env=_env(bridge_home, plugin_site, ""))
    assert gone.returncode == 2 and "No such command 'sample-hello'" in gone.stderr


def test_misspelt_hook_fails_loudly(bridge_home, plugin_site):
    result = run_bridge("plugins", env=_env(bridge_home, plugin_site, "misspelt"))
    assert result.returncode == 10  # ExitCode.PLUGIN
    assert "unknown hook 'register_comands'" in result.stdout + result.stderr
    assert "bridgecli_misspelt" in result.stdout + result.stderr
    # loud on every command, but the rest of bridge keeps working
    helped = run_bridge("--help", env=_env(bridge_home, plugin_site, "misspelt"))
    assert helped.returncode == 0 and "register_comands" in helped.stderr
    # --version never loads plugins, so even a broken install can report its version
    assert run_bridge("--version", env=_env(bridge_home, plugin_site, "misspelt")).returncode == 0


def test_in_process_load_and_provider_lookup(bridge_home, monkeypatch):
    monkeypatch.setenv("BRIDGE_LOAD_PLUGINS", "")
    loaded = plugins.load()
    assert loaded.provider("backends", "hold") is not None
    assert loaded.provider("launchers", "subprocess") is not None
    with pytest.raises(NotFound) as err:
        loaded.provider("backends", "nope")
    assert "installed: exec, hold" in str(err.value)


def _fake_plugin(monkeypatch, name: str, **hooks) -> None:
    """Register an in-memory module as an extra built-in plugin for one test."""
    import types

    import bridgecli

    module = types.ModuleType(name)
    for hook_name, func in hooks.items():
        setattr(module, hook_name, bridgecli.hookimpl(func))
    monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(plugins, "DEFAULT_PLUGINS", (*plugins.DEFAULT_PLUGINS, name))


def test_hook_that_raises_is_reported_with_the_plugin_name(bridge_home, monkeypatch):
    monkeypatch.setenv("BRIDGE_LOAD_PLUGINS", "")

    def register_launchers(register):
        raise RuntimeError("boom")

    _fake_plugin(monkeypatch, "fake.raiser", register_launchers=register_launchers)
    loaded = plugins.load()
    assert loaded.failures == {"raiser": "register_launchers raised RuntimeError: boom"}
    assert loaded.provider("launchers", "subprocess") is not None  # the others still load


def test_a_name_already_provided_is_refused_naming_the_owner(bridge_home, monkeypatch):
    monkeypatch.setenv("BRIDGE_LOAD_PLUGINS", "")

    def register_delivery_backends(register):
        register("hold", object)

    _fake_plugin(monkeypatch, "fake.dup", register_delivery_backends=register_delivery_backends)
    loaded = plugins.load()
    assert "already provided by hold_backend" in loaded.failures["dup"]
    assert loaded.providers["backends"]["hold"][0] == "hold_backend"


def test_bad_command_target_names_the_target():
    with pytest.raises(PluginError) as err:
        plugins.resolve_target("no_such_module_xyz:cmd")
    assert "no_such_module_xyz:cmd" in str(err.value)


def test_trace_hooks_switch_prints_every_hook_call(bridge_home, plugin_site):
    env = {**_env(bridge_home, plugin_site, "sample"), "BRIDGE_TRACE_HOOKS": "1"}
    result = run_bridge("plugins", env=env)
    assert result.returncode == 0
    for hook in ("register_commands", "register_delivery_backends", "register_launchers", "register_browser_targets"):
        assert f"bridge: hook {hook} -> " in result.stderr
    assert "'sample'" in result.stderr


def test_a_plugin_command_cannot_shadow_a_builtin(bridge_home, monkeypatch):
    from click.testing import CliRunner

    from bridgecli.cli import root

    monkeypatch.setenv("BRIDGE_LOAD_PLUGINS", "")

    def register_commands(register):
        register("doctor", "bridgecli_sample.impl:hello", "Not the real doctor.")

    _fake_plugin(monkeypatch, "fake.clash", register_commands=register_commands)
    plugins.reset()
    result = CliRunner().invoke(root, ["--help"], catch_exceptions=False)
    assert "Check config, broker, gateway and file permissions." in result.output
    assert "Not the real doctor." not in result.output
    assert plugins.get().failures["clash"] == "command 'doctor' clashes with a built-in"
