"""Threads per model run: physical cores, within a cgroup CPU quota (v1 and v2, nested groups,
a container's own view), read from /proc and /sys/fs/cgroup trees laid out as Linux has them."""

from __future__ import annotations

from pathlib import Path

import pytest
from yomiage_engine.onnx.cores import cpu_quota, usable_cores

FOUR_CORES = "".join(f"processor\t: {n}\nphysical id\t: 0\ncore id\t\t: {n}\n\n" for n in range(4))
# Two physical cores with two hyper-threads each.
HYPER_THREADS = "".join(
    f"processor\t: {n}\nphysical id\t: 0\ncore id\t\t: {n // 2}\n\n" for n in range(4)
)


def _proc(tmp_path: Path, cgroup: str, cpuinfo: str = FOUR_CORES) -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text(cgroup)
    (proc / "cpuinfo").write_text(cpuinfo)
    return proc


def _write(folder: Path, **files: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("_", ".", 1)).write_text(text + "\n")


@pytest.fixture(autouse=True)
def _eight_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Affinity wider than any fake cpuinfo, so that cpuinfo and the quota decide."""
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: set(range(8)))


def test_no_limit_means_every_physical_core(tmp_path: Path) -> None:
    cgroups = tmp_path / "cgroup"
    _write(cgroups, cpu_max="max 100000")
    assert cpu_quota(_proc(tmp_path, "0::/\n"), cgroups) is None
    assert usable_cores(_proc(tmp_path / "a", "0::/\n"), cgroups) == 4
    assert usable_cores(_proc(tmp_path / "b", "0::/\n", HYPER_THREADS), cgroups) == 2


@pytest.mark.parametrize(
    ("quota", "threads"), [(42_000, 1), (140_000, 1), (160_000, 2), (250_000, 3), (900_000, 4)]
)
def test_a_v2_quota_rounds_to_whole_cpus(tmp_path: Path, quota: int, threads: int) -> None:
    cgroups = tmp_path / "cgroup"
    _write(cgroups / "system.slice" / "ha.service", cpu_max=f"{quota} 100000")
    proc = _proc(tmp_path, "0::/system.slice/ha.service\n")
    assert cpu_quota(proc, cgroups) == pytest.approx(quota / 100_000)
    assert usable_cores(proc, cgroups) == threads


def test_the_tightest_group_on_the_way_up_counts(tmp_path: Path) -> None:
    cgroups = tmp_path / "cgroup"
    _write(cgroups / "outer", cpu_max="50000 100000")
    _write(cgroups / "outer" / "inner", cpu_max="max 100000")
    assert cpu_quota(_proc(tmp_path, "0::/outer/inner\n"), cgroups) == pytest.approx(0.5)


def test_a_v1_quota_with_cpu_and_cpuacct_mounted_together(tmp_path: Path) -> None:
    cgroups = tmp_path / "cgroup"
    _write(
        cgroups / "cpu,cpuacct" / "docker" / "abc",
        cpu_cfs_quota_us="150000",
        cpu_cfs_period_us="50000",
    )
    _write(cgroups / "cpu,cpuacct", cpu_cfs_quota_us="-1", cpu_cfs_period_us="100000")
    proc = _proc(tmp_path, "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n")
    assert cpu_quota(proc, cgroups) == pytest.approx(3.0)
    assert usable_cores(proc, cgroups) == 3


def test_inside_a_container_its_own_group_is_the_root(tmp_path: Path) -> None:
    """Without a cgroup namespace the path names the host's group, absent from the
    container's view: the walk up reaches the container's group, mounted at the root."""
    cgroups = tmp_path / "cgroup"
    _write(cgroups / "cpu", cpu_cfs_quota_us="50000", cpu_cfs_period_us="100000")
    proc = _proc(tmp_path, "3:cpu:/docker/0123abcd\n")
    assert cpu_quota(proc, cgroups) == pytest.approx(0.5)
    assert usable_cores(proc, cgroups) == 1


def test_unreadable_files_mean_no_limit(tmp_path: Path) -> None:
    cgroups = tmp_path / "cgroup"
    _write(cgroups / "g", cpu_max="garbage")
    assert cpu_quota(_proc(tmp_path, "0::/g\n"), cgroups) is None
    assert cpu_quota(tmp_path / "no-proc", cgroups) is None
