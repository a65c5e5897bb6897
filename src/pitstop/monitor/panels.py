"""What the monitor shows, as rich renderables built from a snapshot: the verdict line,
the GPU and host panels and the process rows.

Pure functions of (snapshot, history, width): the Textual app puts them in its widgets,
``--once`` prints them with a plain rich console, and neither needs the other. Every
line is laid out for the width it is given; values have fixed widths and free text is
shortened at a word boundary with ``…``, so that nothing is ever cut mid-word.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from pitstop.monitor.history import History

__all__ = [
    "PROCESS_COLUMNS",
    "ProcessRow",
    "bar",
    "fit_words",
    "fmt_bytes",
    "fmt_rate",
    "gpu_panel",
    "host_panel",
    "process_columns",
    "process_rows",
    "sparkline",
    "verdict_text",
]

SPARK = "▁▂▃▄▅▆▇█"
LABEL_W = 10
VALUE_W = 15
CELL_MIN = 38
VERDICT_STYLE = {"input-bound": "bold yellow", "io-bound": "bold red",
                 "host-bound": "bold magenta", "compute-bound": "bold green",
                 "memory-bound": "bold cyan"}


# ------------------------------------------------------------------------ formatting
def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "n/a"
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_rate(bps: float | None) -> str:
    if bps is None:
        return "n/a"
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bps >= size:
            return f"{bps / size:.1f} {unit}"
    return f"{bps:.0f} B/s"


def fmt_pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0f} %"


def fit_words(text: str, width: int) -> str:
    """``text`` if it fits, else as many whole words as fit followed by ``…``."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    if width == 1:
        return "…"
    cut = text[: width - 1]
    space = cut.rfind(" ")
    # One long word (a path): keep its head, still marked as shortened.
    cut = cut[:space] if space > 0 else cut
    return cut.rstrip() + "…"


def sparkline(values: Sequence[float | None], width: int, top: float | None = None) -> str:
    """The last ``width`` values as block characters (``top`` is full height; default: the
    largest value shown); a missing value is a space; left-padded to ``width``."""
    if width <= 0:
        return ""
    shown = list(values)[-width:]
    nums = [v for v in shown if v is not None]
    scale = top if top else (max(nums) if nums else 0.0)
    chars = []
    for v in shown:
        if v is None:
            chars.append(" ")
        elif scale <= 0:
            chars.append(SPARK[0])
        else:
            chars.append(SPARK[max(0, min(len(SPARK) - 1, round(v / scale * (len(SPARK) - 1))))])
    return "".join(chars).rjust(width)


def bar(fraction: float | None, width: int) -> str:
    if width <= 0:
        return ""
    if fraction is None:
        return " " * width
    full = max(0, min(width, round(fraction * width)))
    return "█" * full + "░" * (width - full)


# ------------------------------------------------------------------------ cells
@dataclass(frozen=True)
class Cell:
    """One metric: a label, its value text, and a series for the sparkline."""

    label: str
    value: str
    series: Sequence[float | None] = ()
    top: float | None = None
    style: str = ""


def _cells_to_lines(cells: list[Cell], width: int) -> list[Text]:
    cols = max(1, min(len(cells) or 1, width // CELL_MIN))
    cell_w = width // cols
    lines = []
    for start in range(0, len(cells), cols):
        line = Text()
        for c in cells[start:start + cols]:
            value_w = max(VALUE_W, len(c.value))  # a long value takes the sparkline's room
            spark_w = cell_w - LABEL_W - value_w - 2
            line.append(c.label.ljust(LABEL_W), style="bold")  # labels are short by design
            line.append(c.value.rjust(value_w), style=c.style)
            if spark_w >= 3:
                line.append(" " + sparkline(c.series, spark_w, c.top) + " ", style="cyan")
            else:
                line.append(" " * max(0, cell_w - LABEL_W - value_w))
        lines.append(line)
    return lines


def _join(lines: list[Text]) -> Text:
    return Text("\n").join(lines)


# ------------------------------------------------------------------------ verdict
def verdict_text(snap: dict[str, Any], width: int, lines: int = 1,
                 pids: set[int] | None = None) -> Text:
    """The first ``lines`` verdicts (busiest training process first), each in full and
    wrapped at words by the widget, and how many more there are; ``pids``: only the
    verdicts of these processes (and those about no process), as the table's filter."""
    verdicts = [v for v in snap.get("verdicts") or []
                if pids is None or v.get("pid") is None or v["pid"] in pids]
    if not verdicts:
        return Text("measuring…", style="dim")
    text = Text()
    for n, v in enumerate(verdicts[:max(1, lines)]):
        if n:
            text.append("\n")
        text.append("▶ ", style="bold")
        text.append(v["line"], style=VERDICT_STYLE.get(v.get("verdict") or "", "bold"))
    more = len(verdicts) - max(1, lines)
    if more > 0:
        text.append(f"  (+{more} more: a taller terminal shows them)", style="dim")
    return text


# ------------------------------------------------------------------------ GPUs
def _gpu_cells(g: dict[str, Any], h: History) -> list[Cell]:
    i = g["index"]
    gpm = g.get("gpm") or {}

    def s(key: str) -> list[float | None]:
        return h.series(("gpu", i, key))

    cells = [Cell("util", fmt_pct(g.get("utilization_gpu_pct")), s("utilization_gpu_pct"), 100)]
    if gpm:
        cells += [Cell("SM act", fmt_pct(gpm.get("sm_active_pct")), s("sm_active_pct"), 100),
                  Cell("occupancy", fmt_pct(gpm.get("sm_occupancy_pct")), s("sm_occupancy_pct"), 100),
                  Cell("tensor", fmt_pct(gpm.get("tensor_active_pct")), s("tensor_active_pct"), 100),
                  Cell("DRAM bw", fmt_pct(gpm.get("dram_bw_util_pct")), s("dram_bw_util_pct"), 100),
                  Cell("PCIe rx", fmt_rate(gpm.get("pcie_rx_bps")), s("pcie_rx_bps")),
                  Cell("PCIe tx", fmt_rate(gpm.get("pcie_tx_bps")), s("pcie_tx_bps"))]
    else:
        rx, tx = g.get("pcie_rx_kbps"), g.get("pcie_tx_kbps")
        cells += [Cell("PCIe rx", fmt_rate(None if rx is None else rx * 1e3), s("pcie_rx_kbps")),
                  Cell("PCIe tx", fmt_rate(None if tx is None else tx * 1e3), s("pcie_tx_kbps"))]
    used, total = g.get("memory_used_bytes"), g.get("memory_total_bytes")
    mem = (f"{used / 2**30:.1f}/{total / 2**30:.0f} GiB" if used is not None and total
           else fmt_bytes(used))
    power, limit = g.get("power_draw_w"), g.get("power_limit_w")
    pw = f"{power:.0f}/{limit:.0f} W" if power is not None and limit else (
        "n/a" if power is None else f"{power:.0f} W")
    clk, clk_max = g.get("clock_sm_mhz"), g.get("clock_sm_max_mhz")
    ck = f"{clk:.0f}/{clk_max:.0f} MHz" if clk is not None and clk_max else (
        "n/a" if clk is None else f"{clk:.0f} MHz")
    temp, slow = g.get("temperature_c"), g.get("temperature_slowdown_c")
    hot = temp is not None and slow is not None and temp >= slow - 5
    cells += [Cell("memory", mem, s("memory_used_bytes"), total),
              Cell("power", pw, s("power_draw_w"), limit,
                   "bold red" if power and limit and power >= 0.97 * limit else ""),
              Cell("temp", "n/a" if temp is None else f"{temp:.0f} °C", s("temperature_c"),
                   slow, "bold red" if hot else ""),
              Cell("SM clock", ck, s("clock_sm_mhz"), clk_max)]
    return cells


def _compact_gpu_line(g: dict[str, Any], h: History, width: int) -> Text:
    """One line per GPU, for many GPUs on a small screen: the numbers that say whether it
    works and how hard, then a sparkline of its busy share."""
    gpm = g.get("gpm") or {}
    used, total = g.get("memory_used_bytes"), g.get("memory_total_bytes")
    power, limit = g.get("power_draw_w"), g.get("power_limit_w")
    if g.get("error"):
        return Text(fit_words(f"GPU {g['index']:<2} cannot be read: {g['error']}", width),
                    style="bold red")
    parts = [f"GPU {g['index']:<2}", f"util {fmt_pct(g.get('utilization_gpu_pct')):>5}"]
    if gpm:
        parts.append(f"SM {fmt_pct(gpm.get('sm_active_pct')):>5}")
    parts.append(f"mem {used / 2**30:4.1f}/{total / 2**30:.0f}G" if used is not None and total else "mem n/a")
    parts.append(f"{power:3.0f}/{limit:.0f}W" if power is not None and limit else "power n/a")
    if g.get("temperature_c") is not None:
        parts.append(f"{g['temperature_c']:.0f}°C")
    text = "  ".join(parts)
    line = Text(text[:width])
    key = "sm_active_pct" if gpm else "utilization_gpu_pct"
    spark_w = width - len(text) - 2
    if spark_w >= 3:
        line.append("  " + sparkline(h.series(("gpu", g["index"], key)), spark_w, 100), style="cyan")
    if [n for n in g.get("clocks_event_names") or [] if n != "gpu_idle"]:
        line.stylize("bold red", 0, len(f"GPU {g['index']:<2}"))
    return line


# What the panel calls the NVML fields it shows, for "n/a: …" notes.
_FIELD_LABELS = {"utilization_gpu_pct": "util", "memory_used_bytes": "memory",
                 "power_draw_w": "power", "power_limit_w": "power limit",
                 "temperature_c": "temp", "temperature_slowdown_c": "slowdown temp",
                 "clock_sm_mhz": "SM clock", "clock_sm_max_mhz": "max SM clock",
                 "clocks_event_reasons": "clock reasons", "pcie_rx_kbps": "PCIe",
                 "pcie_tx_kbps": "PCIe"}


def _gpu_notes(g: dict[str, Any], reasons: list[str]) -> list[str]:
    """Why numbers are missing or held back, most urgent first."""
    if g.get("error"):
        lost = " (fell off the bus? `dmesg | grep -i xid`)" if "lost" in g["error"].lower() else ""
        return [f"cannot read this GPU: {g['error']}{lost}"]
    note = []
    if reasons:
        note.append("clocks held back: " + ", ".join(reasons))
    if g.get("gpm_unavailable") and not g.get("gpm"):
        note.append(f"no SM activity: {g['gpm_unavailable']}")
    by_reason: dict[str, list[str]] = {}
    for field, why in (g.get("unavailable_fields") or {}).items():
        label = _FIELD_LABELS.get(field)
        if label and label not in by_reason.setdefault(why, []):
            by_reason[why].append(label)
    if g.get("process_util_unavailable"):
        by_reason.setdefault(g["process_util_unavailable"], []).append("per-process SM %")
    note += [f"n/a {', '.join(labels)}: {why}" for why, labels in by_reason.items() if labels]
    return note


def gpu_panel(snap: dict[str, Any], h: History, width: int, *, compact: bool = False) -> Text:
    """Every GPU's panel, or one line per GPU with ``compact`` (many GPUs, few rows)."""
    gpus = snap.get("gpus") or []
    if not gpus:
        return Text(fit_words(snap.get("gpu_unavailable") or "no GPU", width), style="dim")
    if compact:
        names = sorted({str(g["name"]) for g in gpus if g.get("name")})
        head = Text(fit_words(f"{len(gpus)} GPUs  {', '.join(names)}  (one line each: the "
                              "screen is short)", width), style="bold reverse")
        return _join([head, *(_compact_gpu_line(g, h, width) for g in gpus)])
    lines: list[Text] = []
    for g in gpus:
        link = (f" PCIe Gen{g['pcie_link_gen']} x{g['pcie_link_width']}"
                if g.get("pcie_link_gen") and g.get("pcie_link_width") else "")
        title = fit_words(f"GPU {g['index']}  {g.get('name') or 'unknown GPU'} {link}", width)
        lines.append(Text(title, style="bold reverse"))
        if not g.get("error"):  # a lost GPU has no numbers: only the reason
            lines += _cells_to_lines(_gpu_cells(g, h), width)
        reasons = [n for n in g.get("clocks_event_names") or [] if n != "gpu_idle"]
        note = _gpu_notes(g, reasons)
        # The line is kept when empty: throttle reasons come and go, and a panel that
        # grew and shrank by a line would make the table below jump under the mouse.
        lines.append(Text(fit_words("; ".join(note), width),
                          style="bold red" if reasons or g.get("error") else "dim"))
    for u in (snap.get("unmatched_gpu_processes") or [])[:1]:
        lines.append(Text(fit_words(f"GPU {u['index']}: PID {u['pid']} is in another PID "
                                    "namespace", width), style="dim"))
    return _join(lines)


# ------------------------------------------------------------------------ host
def _cores(per_core: list[float], width: int, max_rows: int) -> list[Text]:
    cell = 9
    per_row = max(1, width // cell)
    if len(per_core) <= per_row * max_rows:
        lines = []
        for start in range(0, len(per_core), per_row):
            line = Text()
            for i, pct in enumerate(per_core[start:start + per_row], start):
                line.append(f"{i:>3}", style="dim")
                line.append(sparkline([pct], 1, 100), style="cyan")
                line.append(f"{pct:>4.0f}%")
            lines.append(line)
        return lines
    # Many cores: one character per core, a heat strip.
    strip_w = max(1, width - LABEL_W)
    lines = []
    for start in range(0, len(per_core), strip_w):
        chunk = per_core[start:start + strip_w]
        line = Text(f"{start}-{start + len(chunk) - 1}".ljust(LABEL_W)[:LABEL_W], style="dim")
        line.append(sparkline(chunk, len(chunk), 100), style="cyan")
        lines.append(line)
    return lines


def host_panel(snap: dict[str, Any], h: History, width: int, *, core_rows: int = 2,
               max_disks: int = 3) -> Text:
    cpu = snap.get("cpu") or {}
    mem = snap.get("memory") or {}
    load = cpu.get("load_avg")
    lines = [Text(fit_words(f"HOST  {snap.get('host', '')}  {cpu.get('count') or '?'} CPUs", width),
                  style="bold reverse")]
    if cpu.get("per_core_pct"):
        lines += _cores(cpu["per_core_pct"], width, core_rows)
    cells = [Cell("CPU", fmt_pct(cpu.get("busy_pct")), h.series(("cpu", "busy_pct")), 100),
             Cell("iowait", fmt_pct(cpu.get("iowait_pct")), h.series(("cpu", "iowait_pct")), 100,
                  "bold red" if (cpu.get("iowait_pct") or 0) >= 10 else ""),
             Cell("load", " ".join(f"{x:.2f}" if x < 10 else f"{x:.1f}" for x in load)
                  if load else "n/a")]
    total = mem.get("total_bytes")

    def used_of(used: Any, of: Any) -> str:
        if used is None:
            return "n/a"
        return f"{used / 2**30:.1f}/{of / 2**30:.0f} GiB" if of else fmt_bytes(used)

    if mem:
        cells += [Cell("memory", used_of(mem.get("used_bytes"), total),
                       h.series(("mem", "used_bytes")), total),
                  Cell("swap", used_of(mem.get("swap_used_bytes"), mem.get("swap_total_bytes"))
                       if mem.get("swap_total_bytes") else "none",
                       h.series(("mem", "swap_used_bytes")), mem.get("swap_total_bytes") or None,
                       "bold red" if (mem.get("swap_used_bytes") or 0) > 2**30 else ""),
                  Cell("/dev/shm", used_of(mem.get("shm_used_bytes"), mem.get("shm_total_bytes")),
                       h.series(("mem", "shm_used_bytes")), mem.get("shm_total_bytes"))]
    disks = sorted(snap.get("disks") or [],
                   key=lambda d: -((d.get("read_bps") or 0) + (d.get("write_bps") or 0)))
    for d in disks[:max_disks]:
        name = d["name"] if len(d["name"]) <= LABEL_W - 3 else d["name"][:LABEL_W - 4] + "…"
        cells += [Cell(f"{name} r", fmt_rate(d.get("read_bps")), h.series(("disk", d["name"], "read_bps"))),
                  Cell(f"{name} w", fmt_rate(d.get("write_bps")), h.series(("disk", d["name"], "write_bps")))]
    lines += _cells_to_lines(cells, width)
    if len(disks) > max_disks:
        lines.append(Text(f"{len(disks) - max_disks} more disks idle or quieter", style="dim"))
    return _join(lines)


# ------------------------------------------------------------------------ processes
#: (key, header, width); width 0: takes what is left.
PROCESS_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("pid", "PID", 8), ("container", "CONTAINER", 16), ("cpu", "CPU %", 6),
    ("rss", "RSS", 9), ("gpu_mem", "GPU MEM", 9), ("sm", "SM %", 4),
    ("state", "STATE", 5), ("command", "COMMAND", 0),
)
SORT_KEYS = ("cpu", "rss", "gpu_mem", "pid", "command")
_STATE_SHORT = {"running": "run", "sleeping": "sleep", "disk-sleep": "disk", "zombie": "zomb",
                "stopped": "stop", "idle": "idle"}


@dataclass(frozen=True)
class ProcessRow:
    pid: int
    cells: dict[str, str]
    sort: dict[str, Any]
    style: str = ""


def process_columns(snap: dict[str, Any], width: int) -> list[tuple[str, str, int]]:
    """The columns worth showing (GPU ones only with GPUs, CONTAINER only with containers),
    the command column taking what the others leave (each column has 1 space of padding
    on each side)."""
    procs = (snap.get("processes") or []) + (snap.get("other_processes") or [])
    cols = []
    for key, head, w in PROCESS_COLUMNS:
        if key in ("gpu_mem", "sm") and not snap.get("gpus"):
            continue
        if key == "container" and not any(p.get("container") for p in procs):
            continue
        cols.append((key, head, w))
    fixed = sum(w + 2 for _, _, w in cols if w)
    return [(k, h, w or max(10, width - fixed - 2)) for k, h, w in cols]


def _gpu_mem(p: dict[str, Any]) -> int | None:
    vals = [g.get("memory_bytes") for g in p.get("gpus") or [] if g.get("memory_bytes") is not None]
    return sum(vals) if vals else None


def _sm(p: dict[str, Any]) -> float | None:
    vals = [g.get("sm_util_pct") for g in p.get("gpus") or [] if g.get("sm_util_pct") is not None]
    return sum(vals) if vals else None


def _short_command(cmdline: str) -> str:
    """The command line with its program as a bare name (``/usr/bin/python3 x.py`` →
    ``python3 x.py``): the arguments are what tells one training run from another.
    A kernel thread's ``[name]`` (``[ksoftirqd/1]``) is a name, not a path."""
    if cmdline.startswith("["):
        return cmdline
    prog, _, rest = cmdline.partition(" ")
    if "/" in prog:
        prog = prog.rstrip("/").rsplit("/", 1)[-1]
    return f"{prog} {rest}".strip()


def _short_path(arg: str) -> str:
    """``/data/sets/run.py`` → ``…/run.py``; ``--data=/mnt/x/train`` → ``--data=…/train``;
    anything that is not a path stays as it is."""
    key, eq, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
    if not eq:
        key, value = "", arg
    if value.startswith("[") or "/" not in value.strip("/"):
        return arg
    return f"{key}{eq}…/{value.rstrip('/').rsplit('/', 1)[-1]}"


def _fit_command(text: str, width: int) -> str:
    """A command line for ``width`` columns: whole if it fits, else with its paths
    reduced to their last part (``…/train_loop.py``), then cut at a word."""
    if len(text) > width:
        text = " ".join(_short_path(a) for a in text.split(" "))
    return fit_words(text, width)


def _row(p: dict[str, Any], prefix: str, command_w: int) -> ProcessRow:
    pid = f"{p['pid']}" + (f"/{p['nspid']}" if p.get("nspid") else "")
    cont = p.get("container") or {}
    label = (cont.get("name") or (cont.get("id") or "")[:12]) if cont else ""
    gm, sm = _gpu_mem(p), _sm(p)
    role = p.get("role")
    if role == "worker":
        what = "DataLoader worker"
    else:
        what = _short_command(p.get("cmdline") or p.get("name") or "")
    cells = {
        "pid": pid, "container": f"{cont.get('runtime', '')}:{label}" if cont else "",
        "cpu": "" if p.get("cpu_cores") is None else f"{100 * p['cpu_cores']:.0f}",
        "rss": fmt_bytes(p.get("rss_bytes")) if p.get("rss_bytes") is not None else "",
        "gpu_mem": fmt_bytes(gm) if gm is not None else "",
        "sm": "" if sm is None else f"{sm:.0f}",
        "state": _STATE_SHORT.get(p.get("state") or "", (p.get("state") or "")[:5]),
        "command": prefix + _fit_command(what, command_w - len(prefix)),
    }
    style = {"training": "bold", "launcher": "bold", "worker": "", "other": "dim"}.get(role or "", "")
    return ProcessRow(p["pid"], cells, {
        "cpu": -(p.get("cpu_cores") or 0.0), "rss": -(p.get("rss_bytes") or 0),
        "gpu_mem": -(gm or 0), "pid": p["pid"], "command": what}, style)


def process_rows(snap: dict[str, Any], *, width: int, sort: str = "cpu", tree: bool = True,
                 filter_text: str = "") -> list[ProcessRow]:
    """Training processes with their workers under them (``tree``), then the busiest
    other processes; ``filter_text`` keeps rows whose command, name, pid or container
    contain it."""
    command_w = next((w for k, _, w in process_columns(snap, width) if k == "command"), 40)
    procs = list(snap.get("processes") or [])
    others = list(snap.get("other_processes") or [])
    needle = filter_text.lower().strip()

    def keep(p: dict[str, Any]) -> bool:
        if not needle:
            return True
        cont = p.get("container") or {}
        hay = " ".join(str(x) for x in (p.get("pid"), p.get("name"), p.get("cmdline"),
                                        cont.get("id"), cont.get("name"), p.get("role")))
        return needle in hay.lower()

    def key(r: ProcessRow) -> Any:
        return r.sort[sort] if sort in r.sort else r.sort["cpu"]

    if not tree:
        rows = [_row(p, "", command_w) for p in procs + others if keep(p)]
        return sorted(rows, key=key)
    kids: dict[int, list[dict[str, Any]]] = {}
    for p in procs:
        parent = p.get("ppid") if p.get("ppid") in {q["pid"] for q in procs} else None
        kids.setdefault(parent or 0, []).append(p)
    out: list[ProcessRow] = []

    def walk(p: dict[str, Any], depth: int, last: bool) -> None:
        prefix = "" if depth == 0 else "  " * (depth - 1) + ("└ " if last else "├ ")
        children = kids.get(p["pid"], [])
        if keep(p) or any(keep(c) for c in children):
            out.append(_row(p, prefix, command_w))
        for i, c in enumerate(sorted(children, key=lambda c: c["pid"])):
            walk(c, depth + 1, i == len(children) - 1)

    roots = sorted((_row(p, "", command_w) for p in kids.get(0, [])), key=key)
    by_pid = {p["pid"]: p for p in procs}
    for r in roots:
        walk(by_pid[r.pid], 0, True)
    out += sorted((_row(p, "", command_w) for p in others if keep(p)), key=key)
    return out
