"""The environment a certificate records (certify/environment.py): complete, machine-readable,
"unknown" only with its reason; library versions from requirements.lock."""

from __future__ import annotations

import json

from tickformer.certify import environment as E


def test_every_unknown_fact_says_why() -> None:
    env = E.environment(cpus=[0])
    json.dumps(env)  # machine-readable as it stands
    for key in (
        "host",
        "cpu",
        "smt",
        "turbo",
        "kernel_cmdline",
        "libraries",
        "isolated_cpus",
        "nohz_full_cpus",
    ):
        assert key in env
    cpu = env["cpu"]["0"]
    for key in ("model", "microcode", "governor", "cstates", "thread_siblings"):
        assert key in cpu
    assert cpu["model"]["value"] != "unknown"  # /proc/cpuinfo is readable on every Linux
    assert "NO REASON GIVEN" not in "\n".join(E.unknowns(env))
    params = env["kernel_cmdline"]["parameters"]
    assert set(params) == set(E.ISOLATION_PARAMETERS)  # each one: its value, or "not set"


def test_a_missing_sysfs_file_is_unknown_with_the_path(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(E, "CPU", tmp_path)  # a kernel with no cpufreq, no cpuidle, no smt files
    assert E.governor(0)["value"] == "unknown" and "cpufreq" in E.governor(0)["reason"]
    assert E.turbo()["value"] == "unknown" and "no_turbo" in E.turbo()["reason"]
    assert "cpuidle" in E.cstates(0)["states"]["reason"]
    assert E.smt()["control"]["reason"].endswith("does not exist on this kernel")
    (tmp_path / "cpu0" / "cpufreq").mkdir(parents=True)
    (tmp_path / "cpu0" / "cpufreq" / "scaling_governor").write_text("performance\n")
    assert E.governor(0)["value"] == "performance"
    (tmp_path / "intel_pstate").mkdir()
    (tmp_path / "intel_pstate" / "no_turbo").write_text("1\n")
    assert E.turbo()["meaning"] == "turbo off"
    for k, (name, lat) in enumerate((("POLL", "0"), ("C6", "170"))):
        d = tmp_path / "cpu0" / "cpuidle" / f"state{k}"
        d.mkdir(parents=True)
        (d / "name").write_text(name)
        (d / "latency").write_text(lat)
        (d / "disable").write_text("0")
    states = E.cstates(0)["states"]["value"]
    assert [(s["name"], s["exit_latency_us"]) for s in states] == [("POLL", "0"), ("C6", "170")]


def test_isolation_parameters_are_read_from_the_kernel_command_line(tmp_path, monkeypatch) -> None:
    cmdline = tmp_path / "cmdline"
    cmdline.write_text("ro quiet isolcpus=nohz,domain,3 nohz_full=3 rcu_nocbs=3 -- init arg isolcpus=9\n")
    monkeypatch.setattr(E, "CMDLINE", cmdline)
    params = E.kernel_cmdline()["parameters"]
    assert params["isolcpus"] == "nohz,domain,3" and params["nohz_full"] == "3"  # not init's "isolcpus=9"
    assert params["irqaffinity"] == "not set"


def test_library_versions_come_from_the_lock(tmp_path) -> None:
    libs = E.lock_versions()
    assert libs["packages"]["numpy"]["locked"] == libs["packages"]["numpy"]["installed"]
    assert "jinja2" in libs["packages"]
    lock = tmp_path / "requirements.lock"
    lock.write_text("numpy==0.0.1 \\\n    --hash=sha256:00\nfoo==1.0 ; sys_platform == 'nowhere'\n")
    got = E.lock_versions(lock)
    assert list(got["packages"]) == ["numpy"]  # a marker that does not hold here: not this platform's
    assert got["drift"] and got["drift"][0].startswith("numpy: locked 0.0.1, installed ")
    missing = E.lock_versions(tmp_path / "none.lock")
    assert missing["lock"]["value"] == "unknown" and "not a checkout" in missing["lock"]["reason"]


def test_turbo_reads_no_turbo_first_then_boost_each_value_with_its_meaning(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(E, "CPU", tmp_path)
    (tmp_path / "cpufreq").mkdir()
    boost = tmp_path / "cpufreq" / "boost"
    for value, meaning in (("1", "boost allowed"), ("0", "boost off")):
        boost.write_text(value + "\n")
        assert E.turbo()["meaning"] == meaning
    boost.write_text("2\n")
    assert E.turbo()["value"] == "2" and "meaning" not in E.turbo()  # an unknown value: no meaning
    (tmp_path / "intel_pstate").mkdir()
    for value, meaning in (("1", "turbo off"), ("0", "turbo allowed")):
        (tmp_path / "intel_pstate" / "no_turbo").write_text(value + "\n")
        assert E.turbo()["meaning"] == meaning  # no_turbo wins over boost
