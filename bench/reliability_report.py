"""Run the fault scenarios and rewrite the results section of docs/reliability.md.

    sudo .venv/bin/python bench/reliability_report.py          # everything (~5 min)
    sudo .venv/bin/python bench/reliability_report.py cluster  # only some: partition, broker_restart,
                                    # gateway_kill9, cluster, cluster_gateway_node

The namespace scenarios need root (network namespaces); the cluster scenario runs on
loopback. The scenarios are the same functions the slow tests run
(tests/multihost/scenarios.py, tests/multihost/cluster.py); here their counts and measured
times are written down instead of asserted. Rows of scenarios not run this time are kept.
Times are wall-clock seconds on whatever machine runs this, so read them as orders of
magnitude: a shared 2-core VM is noisy.
"""

from __future__ import annotations

import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DOC = ROOT / "docs" / "reliability.md"
DATA = ROOT / "docs" / "reliability.json"
START, END = "<!-- reliability:start -->", "<!-- reliability:end -->"
NETNS = ("partition", "broker_restart", "gateway_kill9")
#: report name -> leader_failover mode
CLUSTER = {"cluster": "leader", "cluster_gateway_node": "gateway-node"}


def run(names: list[str]) -> dict[str, dict]:
    from tests.multihost import scenarios
    from tests.multihost.cluster import Cluster, leader_failover
    from tests.support.netns import NetnsLab, netns_supported

    results: dict[str, dict] = {}
    wanted_ns = [n for n in NETNS if n in names]
    if wanted_ns:
        reason = netns_supported()
        if reason:
            print(f"skipping {', '.join(wanted_ns)}: {reason}", file=sys.stderr)
        else:
            root = Path(tempfile.mkdtemp(prefix="bns", dir="/tmp"))
            lab = NetnsLab(root)
            try:
                lab.setup()
                for name in wanted_ns:
                    for host in ("hostA", "hostB"):
                        if lab.host(host).gateway is None:
                            lab.start_gateway(host)
                    print(f"running {name} ...", file=sys.stderr)
                    results[name] = getattr(scenarios, name)(lab).as_dict()
                    print(json.dumps(results[name]), file=sys.stderr)
            finally:
                lab.teardown()
                shutil.rmtree(root, ignore_errors=True)
    wanted_cluster = [n for n in CLUSTER if n in names]
    if wanted_cluster:
        cluster = Cluster()
        root = Path(tempfile.mkdtemp(prefix="bcr", dir="/tmp"))
        try:
            cluster.start()
            for name in wanted_cluster:
                print(f"running {name} ...", file=sys.stderr)
                results[name] = leader_failover(cluster, root / name, mode=CLUSTER[name], timeout=60).as_dict()
                print(json.dumps(results[name]), file=sys.stderr)
                for node in cluster.nodes:  # the killed node rejoins for the next scenario
                    if not node.is_running():
                        node.start()
        finally:
            cluster.stop()
            shutil.rmtree(root, ignore_errors=True)
    return results


def render(results: dict[str, dict]) -> str:
    lines = [
        START,
        "",
        f"Last run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.node()} "
        f"({platform.machine()}, Python {platform.python_version()}).",
        "",
        "| fault | sent | delivered | lost | duplicated | delivered but unconfirmed | refused sends |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    order = [n for n in (*NETNS, *CLUSTER) if n in results]
    for name in order:
        r = results[name]
        lines.append(
            f"| {r['fault']} | {r['sent']} | {r['delivered']} | {r['lost']} | {r['duplicated']} | "
            f"{r['unconfirmed_delivered']} | {r['send_errors']} |"
        )
    lines += ["", "Measured times (seconds):", ""]
    for name in order:
        r = results[name]
        timing = "; ".join(f"{k} **{'n/a' if v is None else v}**" for k, v in r["times"].items())
        lines.append(f"- **{r['fault']}**: {timing}.")
        for note in r["notes"]:
            lines.append(f"  - {note}")
    lines += ["", END]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if {"-h", "--help"} & set(argv):
        print(__doc__.strip())
        return 0
    names = argv or [*NETNS, *CLUSTER]
    unknown = set(names) - {*NETNS, *CLUSTER}
    if unknown:
        print(f"unknown scenario(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    previous = json.loads(DATA.read_text()) if DATA.exists() else {}
    results = {**previous, **run(names)}
    DATA.write_text(json.dumps(results, indent=2) + "\n")
    text = DOC.read_text()
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    DOC.write_text(head + render(results) + tail)
    print(f"wrote {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
