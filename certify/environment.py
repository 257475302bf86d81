"""The environment of a campaign, complete and machine-readable: what an assessor needs to judge
a certificate and to reproduce it (docs/certify.md, "Environment").

Every fact is read from where the kernel publishes it (/proc/cpuinfo, /proc/cmdline, sysfs) and
recorded as {"value": ..., "source": path}; a fact that cannot be read is {"value": "unknown",
"reason": ...}, the reason naming what was missing (e.g. a virtual CPU with no cpufreq
directory), never a bare "unknown".

    environment(cpus=[1])        host, CPU model and microcode, SMT, turbo, governor and C-states
                                 of the CPUs used, kernel and its command line (isolcpus,
                                 nohz_full, rcu_nocbs), library versions from requirements.lock
    lock_versions()              {package: {"locked", "installed"}} from requirements.lock

Sources: the kernel's sysfs ABI documents (Documentation/ABI/testing/sysfs-devices-system-cpu:
smt/control and smt/active, cpuN/cpufreq/scaling_governor, cpufreq/boost,
intel_pstate/no_turbo, cpuN/cpuidle/stateK/{name,latency,disable}, isolated, nohz_full) and
kernel-parameters.txt (isolcpus=, nohz_full=, rcu_nocbs=, irqaffinity=, idle=,
intel_idle.max_cstate=, processor.max_cstate=).

Not real-time code.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import socket
from importlib import metadata
from pathlib import Path
from typing import Any

CPU = Path("/sys/devices/system/cpu")
CPUINFO = Path("/proc/cpuinfo")
CMDLINE = Path("/proc/cmdline")
ISOLATION_PARAMETERS = (
    "isolcpus",
    "nohz_full",
    "rcu_nocbs",
    "irqaffinity",
    "idle",
    "intel_idle.max_cstate",
    "processor.max_cstate",
    "intel_pstate",
    "mitigations",
)
# requirements.lock sits at the root of a checkout, beside core/ (the `tickformer` package's folder)
LOCK = Path(__file__).resolve().parent.parent / "requirements.lock"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?\s*$")


def fact(path: Path | str) -> dict[str, Any]:
    """{"value": the file's stripped text, "source": path}, or {"value": "unknown", "reason"}."""
    p = Path(path)
    try:
        return {"value": p.read_text().strip(), "source": str(p)}
    except FileNotFoundError:
        return {"value": "unknown", "reason": f"{p} does not exist on this kernel"}
    except OSError as exc:
        return {"value": "unknown", "reason": f"{p} is not readable: {exc.strerror or exc}"}


def _cpuinfo_blocks() -> dict[int, dict[str, str]]:
    """/proc/cpuinfo per processor: {cpu index: {key: value}}."""
    try:
        text = CPUINFO.read_text()
    except OSError:
        return {}
    out: dict[int, dict[str, str]] = {}
    for block in text.strip().split("\n\n"):
        entry: dict[str, str] = {}
        for line in block.splitlines():
            if ":" in line:
                key, value = line.split(":", 1)
                entry[key.strip().lower()] = value.strip()
        if "processor" in entry and entry["processor"].isdigit():
            out[int(entry["processor"])] = entry
    return out


def _from_cpuinfo(info: dict[int, dict[str, str]], cpu: int, keys: tuple[str, ...]) -> dict[str, Any]:
    entry = info.get(cpu, {})
    for key in keys:
        if key in entry:
            return {"value": entry[key], "source": f"{CPUINFO} (processor {cpu}: {key})"}
    if not info:
        return {"value": "unknown", "reason": f"{CPUINFO} is not readable on this OS"}
    return {"value": "unknown", "reason": f"{CPUINFO} has no {' / '.join(keys)} line for processor {cpu}"}


def cpu_model(cpu: int) -> dict[str, Any]:
    """The CPU's model name (x86) or its implementer/part (ARM64, whose cpuinfo has no model name)."""
    info = _cpuinfo_blocks()
    got = _from_cpuinfo(info, cpu, ("model name", "hardware", "cpu model"))
    if got["value"] != "unknown":
        return got
    entry = info.get(cpu, {})
    if "cpu implementer" in entry:  # ARM64: MIDR fields
        value = (
            f"implementer {entry['cpu implementer']} part {entry.get('cpu part', '?')} "
            f"variant {entry.get('cpu variant', '?')} revision {entry.get('cpu revision', '?')}"
        )
        return {"value": value, "source": f"{CPUINFO} (processor {cpu}: MIDR fields)"}
    proc = platform.processor()
    return {"value": proc, "source": "platform.processor()"} if proc else got


def microcode(cpu: int) -> dict[str, Any]:
    """The loaded microcode revision: sysfs first, then /proc/cpuinfo (x86 only; ARM has none)."""
    got = fact(CPU / f"cpu{cpu}" / "microcode" / "version")
    if got["value"] != "unknown":
        return got
    got = _from_cpuinfo(_cpuinfo_blocks(), cpu, ("microcode",))
    if got["value"] == "unknown" and platform.machine() in ("aarch64", "arm64"):
        got["reason"] = (
            "ARM64 CPUs have no loadable microcode revision (firmware is recorded by the board vendor)"
        )
    return got


def smt() -> dict[str, Any]:
    """Simultaneous multithreading: smt/control (on, off, forceoff, notsupported,
    notimplemented) and smt/active (1 when sibling threads are online)."""
    return {"control": fact(CPU / "smt" / "control"), "active": fact(CPU / "smt" / "active")}


def siblings(cpu: int) -> dict[str, Any]:
    """The hardware threads sharing this CPU's core (topology/thread_siblings_list)."""
    return fact(CPU / f"cpu{cpu}" / "topology" / "thread_siblings_list")


def turbo() -> dict[str, Any]:
    """Frequency boost: intel_pstate/no_turbo (1 = off), else cpufreq/boost (1 = on), else unknown
    with the reason."""
    no_turbo = CPU / "intel_pstate" / "no_turbo"
    boost = CPU / "cpufreq" / "boost"
    for path, meanings in (
        (no_turbo, {"1": "turbo off", "0": "turbo allowed"}),
        (boost, {"1": "boost allowed", "0": "boost off"}),
    ):
        if path.exists():
            got = fact(path)
            if got["value"] in meanings:
                got["meaning"] = meanings[got["value"]]
            return got
    return {
        "value": "unknown",
        "reason": f"neither {no_turbo} nor {boost} exists: no cpufreq driver exposes boost control here "
        "(typical of a virtual machine, whose host decides the frequency)",
    }


def governor(cpu: int) -> dict[str, Any]:
    """The cpufreq governor of `cpu`, and the driver; unknown with the reason when the kernel
    has no cpufreq policy for it."""
    base = CPU / f"cpu{cpu}" / "cpufreq"
    if not base.exists():
        return {
            "value": "unknown",
            "reason": f"{base} does not exist: no cpufreq driver manages CPU {cpu} (a virtual CPU, or the "
            "driver is not loaded), so the kernel does not set its frequency",
        }
    got = fact(base / "scaling_governor")
    got["driver"] = fact(base / "scaling_driver")["value"]
    for key in ("scaling_min_freq", "scaling_max_freq", "scaling_cur_freq"):
        got[key] = fact(base / key)["value"]
    return got


def cstates(cpu: int) -> dict[str, Any]:
    """The idle states the kernel may enter on `cpu` (cpuidle), with their exit latency and
    whether each is disabled, and the cpuidle driver and governor."""
    base = CPU / f"cpu{cpu}" / "cpuidle"
    out: dict[str, Any] = {
        "driver": fact(CPU / "cpuidle" / "current_driver"),
        "governor": fact(CPU / "cpuidle" / "current_governor_ro"),
    }
    if not base.exists():
        out["states"] = {
            "value": "unknown",
            "reason": f"{base} does not exist: no cpuidle driver for CPU {cpu}",
        }
        return out
    states = []
    for d in sorted(base.glob("state*"), key=lambda p: int(p.name[5:]) if p.name[5:].isdigit() else 0):
        states.append(
            {
                "state": d.name,
                "name": fact(d / "name")["value"],
                "desc": fact(d / "desc")["value"],
                "exit_latency_us": fact(d / "latency")["value"],
                "disabled": fact(d / "disable")["value"],
            }
        )
    out["states"] = {"value": states, "source": str(base)}
    return out


def kernel_cmdline() -> dict[str, Any]:
    """The kernel's command line and its isolation parameters (absent ones: "not set")."""
    got = fact(CMDLINE)
    params: dict[str, str] = {}
    if got["value"] != "unknown":
        words = got["value"].split(" -- ")[0].split()  # after "--": init's arguments, not the kernel's
        for name in ISOLATION_PARAMETERS:
            hits = [w.split("=", 1)[1] if "=" in w else "" for w in words if w.split("=", 1)[0] == name]
            params[name] = hits[-1] if hits else "not set"
    got["parameters"] = params
    return got


def lock_versions(lock: Path = LOCK) -> dict[str, Any]:
    """Every package requirements.lock pins for this interpreter and platform, with the version
    installed; `drift` lists the differences. Without a lock (an installed wheel, not a
    checkout) the installed versions of the package's own dependencies, with the reason."""
    try:
        text = lock.read_text()
    except OSError as exc:
        deps = ("numpy", "scipy", "onnx", "onnxruntime", "matplotlib", "jinja2", "rich", "cryptography")
        return {
            "lock": {
                "value": "unknown",
                "reason": f"{lock} is not readable ({exc.strerror or exc}): not a checkout",
            },
            "packages": {name: {"locked": None, "installed": _installed(name)} for name in deps},
            "drift": [],
        }
    try:
        from packaging.markers import Marker
        from packaging.utils import canonicalize_name
    except ImportError:  # pragma: no cover - packaging comes with the lock
        Marker, canonicalize_name = None, lambda s: s.lower().replace("_", "-")  # noqa: N806
    packages: dict[str, dict[str, str | None]] = {}
    for line in text.splitlines():
        m = _PIN.match(line)
        if m is None:
            continue
        name, version, marker = m.groups()
        if marker is not None and Marker is not None and not Marker(marker).evaluate():
            continue
        packages[canonicalize_name(name)] = {"locked": version, "installed": _installed(name)}
    drift = [
        f"{name}: locked {v['locked']}, installed {v['installed'] or 'none'}"
        for name, v in sorted(packages.items())
        if v["installed"] != v["locked"]
    ]
    return {
        "lock": {"value": str(lock), "sha256": hashlib.sha256(text.encode()).hexdigest()},
        "packages": packages,
        "drift": drift,
    }


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def environment(*, cpus: list[int]) -> dict[str, Any]:
    """The machine facts of a campaign on `cpus` (the CPUs the timed thread may run on). Not
    real-time code."""
    uname = platform.uname()
    return {
        "host": socket.gethostname(),
        "os": {"system": uname.system, "release": uname.release, "version": uname.version},
        "machine": uname.machine,
        "cpus_used": cpus,
        "cpu_count": os.cpu_count(),
        "cpu": {
            str(c): {
                "model": cpu_model(c),
                "microcode": microcode(c),
                "thread_siblings": siblings(c),
                "governor": governor(c),
                "cstates": cstates(c),
            }
            for c in cpus
        },
        "smt": smt(),
        "turbo": turbo(),
        "isolated_cpus": fact(CPU / "isolated"),
        "nohz_full_cpus": fact(CPU / "nohz_full"),
        "kernel_cmdline": kernel_cmdline(),
        "rt_throttling": {
            "sched_rt_runtime_us": fact("/proc/sys/kernel/sched_rt_runtime_us"),
            "sched_rt_period_us": fact("/proc/sys/kernel/sched_rt_period_us"),
        },
        "libraries": lock_versions(),
    }


def unknowns(env: dict[str, Any], prefix: str = "") -> list[str]:
    """Every 'unknown' fact of `env` with its reason ('path: reason'): a test checks none lacks one."""
    out: list[str] = []
    if isinstance(env, dict):
        if env.get("value") == "unknown":
            out.append(f"{prefix}: {env.get('reason', 'NO REASON GIVEN')}")
        for key, value in env.items():
            out += unknowns(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(env, list):
        for i, value in enumerate(env):
            out += unknowns(value, f"{prefix}[{i}]")
    return out
