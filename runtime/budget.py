"""The wall-clock and memory budget of a run of a user's model: `tickformer verify`, `certify`,
`inspect` and `check` on a bare ONNX model each run inside one `Budget`, so no model can make
them hang or exhaust the machine (a Loop of 2^62 iterations, a tensor of 2^36 elements).

    Budget(seconds, memory, per_run=...)   a context manager: from __enter__ to __exit__ the run
                              may take `seconds` of wall-clock time and grow the process's address
                              space by `memory` bytes (None: no limit of that kind); per_run: no
                              single engine run may take longer (verify: PER_RUN_SHARE of the
                              budget, so a Loop that never ends is stopped in minutes, not at the
                              end of the budget)
    active()                  the budget in force (None outside one)
    BudgetExceeded            what the command reports: one line naming the limit, what was
                              running and the flag that raises it (a TickformerError: exit 2)
    OverBudget                raised *inside* the run when a limit is hit; a BaseException, so
                              neither Hypothesis nor an `except Exception` takes it for a finding
                              about the model; `.error` is the BudgetExceeded to report
    over_budget(kind, where)  the OverBudget for a limit hit at `where` ("time" or "memory")
    engine_over_budget(text)  "time"/"memory" when an engine's error message says it was stopped
                              by the deadline or could not allocate, else None

How the limits are enforced. Time: at the deadline a watchdog thread sets `terminate` on every
ONNX Runtime `RunOptions` registered with the budget (ORT then stops the run between kernels,
also inside a Loop's body; its error names the node), and, when the budget was entered on the
main thread, SIGALRM interrupts Python code (onnx.reference's Loop is a Python loop). With
per_run the watchdog wakes every POLL_S and also terminates an engine run older than per_run
(Graph.run calls `started`/`ended`); without it, it sleeps until the deadline. Memory:
on Linux the soft RLIMIT_AS becomes the address space in use at __enter__ plus `memory` (restored
at __exit__), so an allocation past it fails (numpy's MemoryError, ORT's "Failed to allocate
memory") instead of waking the OOM killer; elsewhere, or with a GPU provider (CUDA reserves
address space by the tens of GiB), only the declared-shape check of the callers applies
(`tensor_bytes` in tickformer.artifact.foreign). Not real-time code; the watchdog thread sleeps
until the deadline and touches nothing on the timed path.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import weakref
from typing import Any

from tickformer.errors import TickformerError

GIB = 1 << 30
DEFAULT_MEMORY_CAP = 8 * GIB  # the default memory budget: this, or half the machine's memory if less
# default wall-clock budgets (seconds) of the commands that run a user's model
DEFAULT_SECONDS = {"verify": 1800.0, "certify": 3600.0, "inspect": 120.0, "check": 120.0}
PER_RUN_SHARE = 0.1  # verify: one engine run may take this share of the wall-clock budget
POLL_S = 0.5  # how often the per-run watchdog looks (it sleeps until the deadline without per_run)
FLAGS = {"time": "--time-budget SECONDS", "memory": "--memory-budget GIB"}

_ACTIVE: list["Budget"] = []
_NODE = re.compile(r"running (\w+) node\. Name:'([^']*)'")
_ALLOC = re.compile(r"failed to allocate|bad_alloc|bad allocation|out of memory", re.IGNORECASE)


class BudgetExceeded(TickformerError):
    """A run of a user's model went past its wall-clock or memory budget (one line: the limit,
    what was running, the flag that raises it). `.kind` is "time" or "memory"; `.results` the
    properties finished before the stop (verify)."""

    kind: str = "time"
    results: list[Any]


class OverBudget(BaseException):
    """Raised inside a run when a limit is hit (module docstring); `.error` is the BudgetExceeded."""

    def __init__(self, error: BudgetExceeded) -> None:
        super().__init__(str(error))
        self.error = error


def default_memory() -> int:
    """DEFAULT_MEMORY_CAP, or half the machine's physical memory when that is less."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return DEFAULT_MEMORY_CAP
    return int(min(DEFAULT_MEMORY_CAP, physical // 2)) if physical > 0 else DEFAULT_MEMORY_CAP


def _address_space() -> int | None:
    """The process's address space in bytes (VmSize of /proc/self/status), None where unknown."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def node_of(text: str) -> str:
    """'the Loop node 'name'' from an ORT error (the innermost node it names), else ''."""
    found = _NODE.findall(text)
    if not found:
        return ""
    op, name = found[-1]
    return f"the {op} node {name!r}" if name else f"a {op} node (unnamed)"


def engine_over_budget(text: str) -> str | None:
    """ "time" when an engine error says the run was terminated, "memory" when it could not
    allocate, else None."""
    if "terminate flag" in text:
        return "time"
    if _ALLOC.search(text):
        return "memory"
    return None


def _size(n: float) -> str:
    return f"{n / GIB:.3g} GiB" if n >= GIB / 16 else f"{n / (1 << 20):.3g} MiB"


class Budget:
    """The limits of one run of a user's model (module docstring). seconds/memory None: no limit
    of that kind. enforce_memory=False: no address-space limit (a GPU provider), the callers'
    declared-shape check only. hint: a sentence added to a time-out's message (e.g. the unbounded
    Loop inspect found)."""

    def __init__(
        self,
        seconds: float | None = None,
        memory: int | None = None,
        *,
        enforce_memory: bool = True,
        hint: str = "",
        per_run: float | None = None,
    ) -> None:
        self.seconds, self.memory, self.enforce_memory, self.hint = seconds, memory, enforce_memory, hint
        self.per_run = per_run
        self.run_started: float | None = None  # when the engine run in progress began (per_run)
        self.run_options: Any = None  # its RunOptions
        self.per_run_hit = False
        self.doing = ""  # what is running now (set by the caller: "verify's property finite_outputs")
        self.in_engine = (
            0  # > 0 while the main thread waits in an engine run (its deadline error names the node)
        )
        self.expired = self.stopped = False
        self.memory_enforced = False
        self._options: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._watch: threading.Thread | None = None
        self._done = threading.Event()
        self._old_handler: Any = None
        self._alarm = False
        self._old_limit: tuple[int, int] | None = None
        self.deadline: float | None = None

    # --- the limits --------------------------------------------------------------------------
    def __enter__(self) -> "Budget":
        if self.seconds is not None:
            self.deadline = time.monotonic() + self.seconds
            if self.per_run is None:  # one wake-up, at the deadline (certify's timed loop sees no other)
                self._timer = threading.Timer(self.seconds, self._expire)
                self._timer.daemon = True
                self._timer.start()
            else:
                self._watch = threading.Thread(target=self._watching, daemon=True, name="budget watchdog")
                self._watch.start()
            if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
                self._old_handler = signal.signal(signal.SIGALRM, self._on_alarm)
                signal.setitimer(signal.ITIMER_REAL, self.seconds)
                self._alarm = True
        if self.memory is not None and self.enforce_memory:
            self._limit_memory(self.memory)
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._done.set()
        if self._alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._old_handler)
            self._alarm = False
        if self._old_limit is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, self._old_limit)
            self._old_limit = None
        if _ACTIVE and _ACTIVE[-1] is self:
            _ACTIVE.pop()

    def _limit_memory(self, memory: int) -> None:
        try:
            import resource
        except ImportError:  # not a POSIX system
            return
        used = _address_space()
        if used is None or not hasattr(resource, "RLIMIT_AS"):
            return
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = used + memory
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        if soft != resource.RLIM_INFINITY and soft <= limit:
            return  # already limited more tightly
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
        self._old_limit = (soft, hard)
        self.memory_enforced = True

    def register(self, run_options: Any) -> None:
        """An ORT RunOptions the deadline terminates (set at once if the deadline has passed)."""
        with self._lock:
            self._options.add(run_options)
            if self.expired:
                run_options.terminate = True

    def _watching(self) -> None:
        """The per-run watchdog: every POLL_S, the deadline, and the engine run in progress."""
        assert self.deadline is not None and self.per_run is not None
        while not self._done.wait(POLL_S):
            now = time.monotonic()
            if now >= self.deadline:
                self._expire()
                return
            started, options = self.run_started, self.run_options
            if started is not None and options is not None and now - started > self.per_run:
                self.per_run_hit = True
                options.terminate = True

    def started(self, run_options: Any) -> None:
        """An engine run begins (per_run); `ended` when it returns."""
        self.in_engine += 1
        self.run_options, self.run_started = run_options, time.monotonic()

    def ended(self) -> None:
        self.in_engine -= 1
        self.run_started = None

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for options in list(self._options):
                options.terminate = True

    def _on_alarm(self, signum: int, frame: Any) -> None:
        self._expire()
        if self.stopped or self.in_engine:
            return  # the engine run returns with its own deadline error, naming the node
        raise self.over("time", "")

    # --- the report --------------------------------------------------------------------------
    def message(self, kind: str, where: str) -> str:
        running = where or self.doing or "the model"
        if kind == "time" and self.per_run_hit and self.per_run is not None and self.seconds:
            hint = f" ({self.hint})" if self.hint else ""
            return (
                f"{running}: one run of the model took more than {self.per_run:g} s, a tenth of the wall-clock "
                f"budget of {self.seconds:g} s{hint}; raise it with {FLAGS['time']} if the model is that slow"
            )
        if kind == "time":
            limit = (
                f"the wall-clock budget of {self.seconds:g} s" if self.seconds else "its wall-clock budget"
            )
            hint = f" ({self.hint})" if self.hint else ""
            return (
                f"{running} ran past {limit}{hint}; raise it with {FLAGS['time']} if the model is that slow"
            )
        limit = f"the memory budget of {_size(self.memory)}" if self.memory else "the memory available"
        return (
            f"{running} ran out of {limit}; raise it with {FLAGS['memory']}, or declare smaller sizes "
            "([axes] in a spec file)"
        )

    def over(self, kind: str, where: str = "") -> OverBudget:
        """The OverBudget to raise for a limit of `kind` hit at `where` (also marks the run stopped)."""
        self.stopped = True
        if kind == "time":
            self._expire()
        error = BudgetExceeded(self.message(kind, where))
        error.kind, error.results = kind, []
        return OverBudget(error)


def active() -> Budget | None:
    """The budget in force, None outside one."""
    return _ACTIVE[-1] if _ACTIVE else None


def over_budget(kind: str, where: str = "") -> OverBudget:
    """The OverBudget for a limit hit at `where`, from the budget in force (or a budget-less one)."""
    return (active() or Budget()).over(kind, where)


def remaining() -> float | None:
    """Seconds left before the deadline of the budget in force (None: no deadline)."""
    b = active()
    if b is None or b.deadline is None:
        return None
    return max(0.0, b.deadline - time.monotonic())
