"""A Linux CPU cap for a group of processes: a cgroup whose CPU time per period is limited.

    with CpuCap("yomiage-bench") as cap:
        subprocess.Popen(cap.wrap(command))  # the command and its children, capped from the start
        cap.set(0.25)                        # a quarter of one core, from now on

cgroup v1 (``cpu.cfs_quota_us`` under /sys/fs/cgroup/cpu) or v2 (``cpu.max``); needs root. The
cap can change while its processes run, so one process can be measured at several caps.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import TracebackType

_V1 = Path("/sys/fs/cgroup/cpu")
_V2 = Path("/sys/fs/cgroup")
PERIOD_US = 100_000


class CpuCapError(RuntimeError):
    """No cgroup CPU controller to use here (not Linux, not root, or none mounted)."""


class CpuCap:
    def __init__(self, name: str) -> None:
        if (_V1 / "cpu.cfs_quota_us").is_file():
            self.folder, self._v2 = _V1 / name, False
        elif (_V2 / "cgroup.controllers").is_file():
            self.folder, self._v2 = _V2 / name, True
        else:
            raise CpuCapError("no cgroup CPU controller under /sys/fs/cgroup")
        self.cpus: float | None = None

    def __enter__(self) -> CpuCap:
        try:
            self.folder.mkdir(exist_ok=True)
        except OSError as err:
            raise CpuCapError(f"cannot make {self.folder}: {err} (root is needed)") from err
        self.set(None)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        # A cgroup goes once it is empty: its processes move back to the root group first.
        for pid in (self.folder / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):  # ended meanwhile
                (self.folder.parent / "cgroup.procs").write_text(pid)
        self.folder.rmdir()

    def set(self, cpus: float | None) -> None:
        """Limit the group to ``cpus`` cores' worth of time (None: no limit)."""
        quota = -1 if cpus is None else max(1000, round(cpus * PERIOD_US))
        if self._v2:
            (self.folder / "cpu.max").write_text(f"{'max' if quota < 0 else quota} {PERIOD_US}")
        else:
            (self.folder / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.folder / "cpu.cfs_quota_us").write_text(str(quota))
        self.cpus = cpus

    def wrap(self, command: list[str]) -> list[str]:
        """``command`` started inside the group: a shell joins it, then becomes the command."""
        procs = self.folder / "cgroup.procs"
        return ["/bin/sh", "-c", f'echo $$ > "{procs}" && exec "$@"', "capped", *command]
