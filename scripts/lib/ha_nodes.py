"""The nodes of a cluster made by scripts/ha, for the Python that fails it over (the replicated
bank test, bench/ha): its ports, its leader, and what to kill for a node to die whole."""

from __future__ import annotations

import pathlib
import re
import urllib.request


def ports(ha_dir: pathlib.Path) -> dict[str, str]:
    """HA_RW, HA_PG_<node>, HA_REST_<node>, ... as ports.env holds them."""
    return dict(re.findall(r"(HA_\w+)=(\d+)\b", (ha_dir / "ports.env").read_text()))


def nodes(port_map: dict[str, str]) -> list[str]:
    return [k[len("HA_PG_"):] for k in port_map if k.startswith("HA_PG_")]


def leader(port_map: dict[str, str]) -> str | None:
    """The node whose Patroni answers its /primary check, as HAProxy asks it."""
    for node in nodes(port_map):
        try:
            url = f"http://127.0.0.1:{port_map['HA_REST_' + node]}/primary"
            with urllib.request.urlopen(urllib.request.Request(url, method="OPTIONS"), timeout=2):
                return node
        except OSError:
            continue
    return None


def postmaster_and_children(pid: int) -> list[int]:
    """A postmaster and every process it started: SIGKILL to all of them is the machine's death
    as far as PostgreSQL can tell (a backend outliving its postmaster could still commit)."""
    out = [pid]
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(proc.name))
    return out
