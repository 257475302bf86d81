"""Generated files: deterministic, written atomically, and passing their own `make test`
(golden vectors from the numpy reference, stale rows planted with NaN/inf, refusals that leave
the state unchanged, the sanitizer run, cppcheck, the sampled exp check) for every decoder kind."""

from __future__ import annotations

import re

import pytest
from _cgutil import DECODERS, SSM, WINDOWED, run_make

from tickformer.codegen import FILES, generate, write
from tickformer.errors import ArtifactError


def test_generation_is_deterministic(arts):
    assert generate(arts["tiny"]) == generate(arts["tiny"])


def test_every_file_is_written(arts, tmp_path):
    out = write(arts["tiny"], tmp_path / "c")
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)


def test_write_refuses_a_foreign_directory(arts, tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(ArtifactError, match="not a tickformer codegen output"):
        write(arts["tiny"], tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me"
    write(arts["tiny"], tmp_path / "c")
    write(arts["tokens"], tmp_path / "c")  # a previous codegen output is replaced
    assert "#define TF_TOKENS 1" in (tmp_path / "c" / "tf_model.h").read_text()


def test_source_is_free_of_what_embedded_code_must_not_use(arts):
    src = generate(arts["tiny"])["tf_model.c"].decode()
    code = re.sub(r"/\*.*?\*/", "", src, flags=re.S)  # comments may name what the code avoids
    for banned in (
        "malloc",
        "calloc",
        "realloc",
        "free(",
        "alloca",
        "printf",
        "memcpy",
        "memset",
        "expf",
        "goto",
    ):
        assert banned not in code, banned
    assert re.findall(r"#include <(\w+)\.h>", code) == ["float", "math", "stddef"]
    assert "static const float tf_w_qkv" in code  # weights are static const arrays


# wintokens and ssm run their `make test` through `tickformer codegen --test` (test_cli_codegen.py)
@pytest.mark.parametrize("name", DECODERS + ("win1", "win4", "winfull", "ssmtokens"))
def test_make_test_passes(arts, name, tmp_path, c_compiler, make_tool):
    out = write(arts[name], tmp_path / name)
    done = run_make(out, "test", make_tool, c_compiler)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    assert log.count("tf_test: all checks passed") == 2, log  # the optimised and the sanitizer build
    for check in (
        "determinism (second run): bitwise identical",
        "stale rows (state filled with NaN): bitwise identical",
        "stale rows (cache filled with inf, -inf, NaN): bitwise identical",
        "refusals: status codes as documented",
    ):
        assert check in log
    assert "special values exact" in log
    assert ("slides: " in log) == (name in WINDOWED)  # a ring cache never fills
    assert ("never full: " in log) == (name in SSM)  # nor does a fixed state
    assert ("ssm elementary" in log and "contracts: 0 broken" in log) == (name in SSM)


def test_golden_check_can_fail(arts, tmp_path, c_compiler, make_tool):
    """The test program is not a formality: a golden output off by 1e-3 fails it."""
    out = write(arts["tiny"], tmp_path / "c")
    golden = (out / "tf_golden.h").read_text()
    start = golden.index("tf_golden_y")
    first = golden.index("{", start) + 1
    end = golden.index(",", first)
    value = float.fromhex(golden[first:end].strip()[:-1])
    (out / "tf_golden.h").write_text(golden[:first] + f"\n    {float(value + 1e-3).hex()}f" + golden[end:])
    done = run_make(out, "check", make_tool, c_compiler)
    assert done.returncode != 0 and "outside the artifact tolerance" in done.stdout
