#!/usr/bin/python3
"""Summarise a `make bench` run: benches/report.py RESULTS_DIR KERNEL.

Reads RESULTS_DIR/<driver>-r<round>.log (qemu/run-pair output of
benches/bench.pair.sh), writes RESULTS_DIR/table.md and RESULTS_DIR/plot.png,
and prints the table.  Figures: throughput in MB/s (10^6 bytes per second of
wall clock), message rate in thousands of messages per second, latency in
microseconds (half the round trip), guest CPU in seconds per GiB moved
(both VMs, USER_HZ jiffies), and for the scale cases the time of one
ibv_reg_mr / ibv_dereg_mr, RC QP create+destroy pairs per second and the
kernel memory each QP takes.  Each cell is the median of the rounds with
min and max; the ratio is rrxe's median over rxe's.  Cases run at an MTU
other than the first carry `_mtuN` in their label; their rows say so.
Writes RESULTS_DIR/scale.png too when the run has scale cases.
"""
import datetime
import glob
import os
import platform
import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(r"^\[vm(\d)\] (RESULT|CPU|STAT|FAILED) (.*)$")
USER_HZ = 100


def fields(text):
    return dict(kv.split("=", 1) for kv in text.split() if "=" in kv)


def load(out):
    """Return {driver: {case: [per-round dict]}}, failures {driver: [case]},
    and the failed rounds' counters {driver: {case: [per-round dict]}}."""
    data = defaultdict(lambda: defaultdict(list))
    lost = defaultdict(lambda: defaultdict(list))
    failures = defaultdict(list)
    for path in sorted(glob.glob(os.path.join(out, "*-r*.log"))):
        driver = os.path.basename(path).rsplit("-r", 1)[0]
        rounds = {}
        failed = []
        cpu = defaultdict(int)
        counters = defaultdict(dict)
        for line in open(path, errors="replace"):
            m = LINE.match(line.strip())
            if not m:
                continue
            f = fields(m.group(3))
            case = (f.get("test"), int(f.get("size", 0)), int(f.get("qps", 1)))
            if m.group(2) == "RESULT":
                rounds[case] = f
            elif m.group(2) == "CPU":
                cpu[case] += int(f["jiffies"])
            elif m.group(2) == "STAT":
                counters[case][int(f["vm"])] = {k: int(v) for k, v in f.items()
                                                 if k not in ("vm", "test", "size", "qps")}
            elif case not in failed:
                # Once a round, whichever VM said so.
                failed.append(case)
        failures[driver].extend(failed)
        qemu = {}
        qemu_path = path[:-len(".log")] + ".qemu"
        if os.path.exists(qemu_path):
            for line in open(qemu_path):
                if line.startswith("QEMU "):
                    f = fields(line[5:])
                    qemu[(f["test"], int(f["size"]), int(f["qps"]))] = {
                        k: float(v) for k, v in f.items() if k not in ("test", "size", "qps")}
        for case, f in rounds.items():
            f = dict(f)
            if case[0] == "qp_mem":
                # The kernel's own: kmalloc above 8 KiB counts in Slab too.
                f["kernel_kib"] = str(float(f["slab_kib"]) + float(f["vmalloc_kib"]))
            f["cpu_jiffies"] = cpu.get(case, 0)
            f["counters"] = counters.get(case, {})
            f["qemu"] = qemu.get(case, {})
            data[driver][case].append(f)
        for case in failed:
            if case not in rounds and counters.get(case):
                lost[driver][case].append({"counters": counters[case], "qemu": qemu.get(case, {})})
    return data, failures, lost


def stat(values):
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def fmt(s, digits=2):
    if s is None:
        return "n/a"
    med, lo, hi = s
    return f"{med:.{digits}f} ({lo:.{digits}f}–{hi:.{digits}f})"


def ratio(a, b, lower_is_better=False):
    if a is None or b is None or b[0] == 0:
        return "n/a"
    return f"{a[0] / b[0]:.2f}"


def metric(runs, key):
    return stat([float(r[key]) for r in runs if key in r])


def cpu_per_gib(runs):
    vals = []
    for r in runs:
        moved = float(r.get("MBps", 0)) * 1e6 * float(r.get("seconds", 0))
        if moved > 0 and r["cpu_jiffies"] > 0:
            vals.append(r["cpu_jiffies"] / USER_HZ / (moved / 2**30))
    return stat(vals)


def per(a, b):
    return a / b if b else None


def vm(c, n, key):
    return c.get(n, {}).get(key, 0)


def drops(c, keys):
    if not all(vm(c, n, "stat_v") >= 2 for n in (1, 2)):
        return None
    return sum(vm(c, n, k) for n in (1, 2) for k in keys)


# The instrumentation table's columns: (heading, function of one round's
# RESULT fields and its per-VM counter deltas). VM 2 runs the client
# (requester), VM 1 the server (responder).
INSTRUMENTS = [
    ("pkts/msg client→", lambda r, c: per(vm(c, 2, "rdma_sent_pkts"), int(r.get("msgs", 0)))),
    ("pkts/msg server→", lambda r, c: per(vm(c, 1, "rdma_sent_pkts"), int(r.get("msgs", 0)))),
    ("tx pkts/kick client", lambda r, c: per(vm(c, 2, "nic_tx_packets"), vm(c, 2, "nic_tx_kicks"))),
    ("tx pkts/kick server", lambda r, c: per(vm(c, 1, "nic_tx_packets"), vm(c, 1, "nic_tx_kicks"))),
    ("pkts/irq client", lambda r, c: per(vm(c, 2, "nic_rx_packets") + vm(c, 2, "nic_tx_packets"), vm(c, 2, "irq_net"))),
    ("pkts/irq server", lambda r, c: per(vm(c, 1, "nic_rx_packets") + vm(c, 1, "nic_tx_packets"), vm(c, 1, "irq_net"))),
    ("softirq squeezes", lambda r, c: vm(c, 1, "softnet_squeezed") + vm(c, 2, "softnet_squeezed")),
    # Where frames were lost: eth0's qdisc, the receive backlog, the NIC
    # (n/a in runs from before these were counted, STAT lines without stat_v).
    ("qdisc drops", lambda r, c: drops(c, ("qdisc_dropped",))),
    ("rx drops", lambda r, c: drops(c, ("softnet_dropped", "nic_rx_dropped"))),
    ("ACK-deferred", lambda r, c: vm(c, 1, "rdma_ack_deferred")),
    ("retries", lambda r, c: vm(c, 2, "rdma_completer_retry_err")),
    ("seq NAKs", lambda r, c: vm(c, 2, "rdma_rcvd_seq_err")),
    ("RNR NAKs", lambda r, c: vm(c, 2, "rdma_rcvd_rnr_err")),
    ("dup requests", lambda r, c: vm(c, 1, "rdma_duplicate_request")),
    # rrxe's own counters (hw_counters.rs); rxe has none of them.
    ("ACKs sent/msg", lambda r, c: per(vm(c, 1, "rdma_sent_acks"), int(r.get("msgs", 0)))),
    ("window-full stops", lambda r, c: vm(c, 2, "rdma_req_window_full")),
    ("credit stops", lambda r, c: vm(c, 1, "rdma_req_credit_stall") + vm(c, 2, "rdma_req_credit_stall")),
    ("host vCPU % client", lambda r, c: busy(r, 2, "vcpu")),
    ("host vCPU % server", lambda r, c: busy(r, 1, "vcpu")),
    ("host main % client", lambda r, c: busy(r, 2, "main")),
    ("host main % server", lambda r, c: busy(r, 1, "main")),
]

RRXE_ONLY = {"ACKs sent/msg", "window-full stops", "credit stops"}


def busy(r, n, kind):
    """Percent of the case's wall clock that a QEMU's threads of `kind` ran on the host."""
    q = r.get("qemu") or {}
    return per(100 * q.get(f"vm{n}_{kind}", 0), q.get("seconds", 0)) if q else None


MTU = re.compile(r"^(.*)_mtu(\d+)$")
# Cases that move no RDMA traffic (bench.pair.sh runs them in VM 2 alone).
CONTROL = ("mr_reg", "qp_rate", "qp_mem")


def split_mtu(test):
    """("write_ev", 9000) for "write_ev_mtu9000"; the first MTU is 0."""
    m = MTU.match(test)
    return (m.group(1), int(m.group(2))) if m else (test, 0)


def at_mtu(mtu):
    return f" at MTU {mtu} (path MTU 4096)" if mtu >= 4192 else (f" at MTU {mtu}" if mtu else "")


def traffic(test):
    base = split_mtu(test)[0]
    return not (base.startswith("iperf3") or base.startswith("lat_") or base in CONTROL)


def human(n):
    """4096 -> "4 KiB"."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def rows_of(case):
    """The table rows of one case: (RESULT key, label, digits)."""
    test, size, qps = case
    base, mtu = split_mtu(test)
    where = at_mtu(mtu)
    if base.startswith("lat_"):
        return [("usec_mean", f"{base} {size} B latency{where}, µs", 1)]
    if base == "iperf3":
        return [("MBps", f"iperf3 TCP (link ceiling){where}, MB/s", 1)]
    if base == "mr_reg":
        return [("usec_reg", f"ibv_reg_mr of {human(size)}, µs", 1),
                ("usec_dereg", f"ibv_dereg_mr of {human(size)}, µs", 1)]
    if base == "qp_rate":
        return [("kqps", "RC QP create+destroy, thousand pairs/s", 2)]
    if base == "qp_mem":
        # VmallocUsed + Slab (kmalloc above 8 KiB counts in Slab too);
        # MemFree, which per-CPU page lists make noisy, as a cross-check.
        return [("kernel_kib", f"kernel memory per RC QP (of {qps}, 256+256 WRs): VmallocUsed + Slab, KiB", 1),
                ("vmalloc_kib", "… VmallocUsed (the queues), KiB", 1),
                ("slab_kib", "… Slab, KiB", 1),
                ("memfree_kib", "… MemFree taken (cross-check), KiB", 1)]
    if base == "write_qps":
        return [("MBps", f"write {size} B × {qps} QP, scale set{where}, MB/s", 2)]
    return [("MBps", f"{base} {size} B × {qps} QP{where}, MB/s", 2)]


def case_order(c):
    test, size, qps = c
    base, mtu = split_mtu(test)
    # Numbers in labels in numeric order (write_w4 before write_w32).
    natural = [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", base)]
    return (mtu, base in CONTROL, natural, qps, size)


def first_mtu(out):
    """The run's first MTU: its cases file's first "mtu N" line (1500 before there were any)."""
    try:
        for line in open(os.path.join(out, "cases")):
            if line.startswith("mtu "):
                return int(line.split()[1])
    except OSError:
        pass
    return 1500


def instruments(data, lost, drivers, cases):
    """A second table: per case and driver, the counters' medians over the
    rounds; a case a driver failed in every round shows its failed rounds'."""
    rows = ["| case | driver | " + " | ".join(h for h, _ in INSTRUMENTS) + " |",
            "|" + "---|" * (2 + len(INSTRUMENTS))]
    for case in cases:
        test, size, qps = case
        if not traffic(test) and not test.startswith("lat_"):
            continue
        for d in drivers:
            runs = [r for r in data[d].get(case, []) if r.get("counters")]
            label = d
            if not runs:
                runs, label = lost[d].get(case, []), f"{d} (failed runs)"
            if not runs:
                continue
            cells = []
            for heading, fn in INSTRUMENTS:
                if d != "rrxe" and heading in RRXE_ONLY:
                    cells.append("–")
                    continue
                vals = [v for v in (fn(r, r["counters"]) for r in runs) if v is not None]
                if not vals:
                    cells.append("n/a")
                    continue
                med = statistics.median(vals)
                cells.append(f"{med:.2f}" if isinstance(med, float) and med != int(med) else f"{int(med)}")
            rows.append(f"| {test} {size} B × {qps} | {label} | " + " | ".join(cells) + " |")
    return rows


def main():
    out, kernel = sys.argv[1], sys.argv[2]
    data, failures, lost = load(out)
    drivers = [d for d in ("rxe", "rrxe") if d in data or d in failures]
    cases = sorted({c for d in data.values() for c in d}, key=case_order)
    rows = []
    head = "| case | " + " | ".join(f"{d} median (min–max)" for d in drivers)
    head += " | rrxe/rxe | " + " | ".join(f"{d} CPU s/GiB" for d in drivers) + " |"
    rows.append(head)
    rows.append("|" + "---|" * (2 + 2 * len(drivers)))
    for case in cases:
        test, size, qps = case
        for key, label, digits in rows_of(case):
            stats = {d: metric(data[d].get(case, []), key) for d in drivers}
            cpus = {d: cpu_per_gib(data[d].get(case, [])) for d in drivers}
            r = ratio(stats.get("rrxe"), stats.get("rxe"))
            cells = " | ".join(fmt(stats[d], digits) for d in drivers)
            cpu_cells = " | ".join(fmt(cpus[d], 1) if traffic(test) else "" for d in drivers)
            rows.append(f"| {label} | {cells} | {r} | {cpu_cells} |")
        if test == "write" and size == 64 and qps == 1:
            mr = {d: metric(data[d].get(case, []), "kmsgps") for d in drivers}
            rows.append(f"| message rate, write 64 B × 1 QP, kmsg/s | "
                        + " | ".join(fmt(mr[d], 2) for d in drivers)
                        + f" | {ratio(mr.get('rrxe'), mr.get('rxe'))} | " + " | ".join("" for _ in drivers) + " |")
    n_rounds = max((len(v) for d in data.values() for v in d.values()), default=0)
    when = datetime.date.today().isoformat()
    header = (f"Benchmark {when}: kernel 7.2 ({kernel} flavour), QEMU TCG, "
              f"{os.cpu_count()} host cores ({platform.processor() or platform.machine()}), "
              f"{n_rounds} rounds per driver; wall-clock timing (benches/rrxe-perf.c); "
              f"eth0 MTU {first_mtu(out)} unless a row says otherwise.\n")
    fail_lines = []
    for d, cs in sorted(failures.items()):
        if not cs:
            continue
        fail_lines.append(f"- {d}: {len(cs)} failed case runs: "
                          + ", ".join(sorted({f'{t} {s} B × {q}' for t, s, q in cs})))
    text = header + "\n" + "\n".join(rows) + "\n"
    inst = instruments(data, lost, drivers, cases)
    if len(inst) > 2:
        text += ("\nWhat each case moved (medians over the rounds; client = VM 2, the requester; "
                 "server = VM 1): RoCE packets each side sent per message, eth0 packets per "
                 "transmit kick of the host and per interrupt (both directions), softirq time "
                 "squeezes, frames dropped by eth0's qdisc and on receive (backlog or NIC; "
                 "both VMs each), the responder's deferred ACKs, the requester's retries and "
                 "sequence and RNR NAKs received, the responder's duplicate requests, and the host CPU "
                 "of each VM's QEMU vCPU thread and main loop (virtio-net's backend) in percent of "
                 "the case's wall clock (benches/qemu-threads).\n\n" + "\n".join(inst) + "\n")
    if fail_lines:
        text += "\nFailed runs (excluded from the figures):\n" + "\n".join(fail_lines) + "\n"
    open(os.path.join(out, "table.md"), "w").write(text)
    print(text)
    plot(out, data, drivers)


# One colour per driver and QP count, whatever the MTU (its line style says
# that), none of them the ceilings' grey.
COLORS = {("rxe", 1): "tab:blue", ("rxe", 4): "tab:orange",
          ("rrxe", 1): "tab:green", ("rrxe", 4): "tab:red"}


def plot(out, data, drivers):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no matplotlib: plot skipped; apt-get install python3-matplotlib)")
        return
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5), sharey=True)
    ceilings = {}
    for d in drivers:
        for (t, _, _), runs in data[d].items():
            base, mtu = split_mtu(t)
            c = metric(runs, "MBps") if base == "iperf3" else None
            if c:
                ceilings[mtu] = max(ceilings.get(mtu, 0), c[0])
    mtus = sorted({split_mtu(t)[1] for d in drivers for (t, _, _) in data[d]})
    for ax, test in zip(axes, ("write", "read", "send")):
        for d in drivers:
            for mtu in mtus:
                name = test + (f"_mtu{mtu}" if mtu else "")
                # Solid and dashed at the first MTU, dotted and dash-dot at another.
                for q, style in ((1, ":o" if mtu else "-o"), (4, "-.s" if mtu else "--s")):
                    color = COLORS.get((d, q))
                    pts = sorted((size, metric(runs, "MBps")[0]) for (t, size, qq), runs in data[d].items()
                                 if t == name and qq == q and metric(runs, "MBps"))
                    if pts:
                        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, color=color,
                                label=f"{d}, {q} QP{at_mtu(mtu)}")
        for mtu, ceiling in ceilings.items():
            ax.axhline(ceiling, color="grey", linestyle=":" if not mtu else "-.",
                       label=f"iperf3 ceiling{at_mtu(mtu)}")
        ax.set_xscale("log", base=2)
        ax.set_title(f"RC {test}")
        ax.set_xlabel("message size (bytes)")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("throughput (MB/s, wall clock)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "plot.png"), dpi=100)
    print(f"plot: {os.path.join(out, 'plot.png')}")
    plot_scale(out, data, drivers, plt)


def plot_scale(out, data, drivers, plt):
    """scale.png: 64 KiB WRITE throughput against QP count, MR registration time against size."""
    series = {}
    for d in drivers:
        for name, key, test in (("qps", "MBps", "write_qps"), ("mr", "usec_reg", "mr_reg")):
            pts = sorted((qps if name == "qps" else size, metric(runs, key)[0], len(runs))
                         for (t, size, qps), runs in data[d].items() if t == test and metric(runs, key))
            if pts:
                series[(d, name)] = pts
    if not series:
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    rounds = max(p[2] for pts in series.values() for p in pts)
    for (d, name), pts in sorted(series.items()):
        ax = left if name == "qps" else right
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", label=d)
        # A point from fewer rounds than the others (the rest failed) says so.
        for x, y, n in pts:
            if n < rounds:
                ax.annotate(f"{n} of {rounds} rounds", (x, y), fontsize=7,
                            textcoords="offset points", xytext=(4, -10))
    left.set_title("RC WRITE 64 KiB, 16 MiB in flight (2 messages a QP at least)")
    left.set_xlabel("QPs")
    left.set_ylabel("throughput (MB/s, wall clock)")
    right.set_title("ibv_reg_mr")
    right.set_xlabel("MR size (bytes)")
    right.set_ylabel("time per call (µs)")
    right.set_yscale("log")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "scale.png"), dpi=100)
    print(f"plot: {os.path.join(out, 'scale.png')}")


if __name__ == "__main__":
    main()
