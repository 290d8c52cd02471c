#!/usr/bin/env python3
"""Condenses the shipped scenarios' result tables (docs/results/*.txt, the output of
`ctp sim NAME`) into one Markdown page: per scenario, one row per run with its efficiency,
Jain index, stability, aggregate goodput and each flow's goodput; a sweep scenario (a
`key=value` after the run name, such as loss-sweep's `loss=0.01`) as a matrix, one column
per value, each cell each flow's goodput, completion time and on-time ratio.

    tools/results-summary.py docs/results > docs/results/SUMMARY.md
"""

import pathlib
import re
import sys

RUN = re.compile(r"^(?P<name>\S.*?)\s+(?P<effic>\S+)\s+(?P<jain>\S+)\s+(?P<fi>\S+)\s+"
                 r"(?P<stab>\S+)\s+(?P<aggr>\S+)\s+(?P<pkts>\d+)\s+(?P<kpkt>\d+)$")
FLOW = re.compile(r"^\s+flow \d+: goodput\s+(?P<goodput>[\d.]+) Mb/s\s+done\s+(?P<done>\S+) s"
                  r"(?:.*on time\s+(?P<on_time>[\d.]+)%)?")
STREAMS = re.compile(r"^\s+flow (?P<flow>\d+): (?P<n>\d+) streams; (?P<late>\d+) late messages, "
                     r"(?P<held>\d+) held by another stream")
STREAM = re.compile(r"^\s+stream\s+(?P<id>\d+) prio\s+(?P<prio>\d+):.*delay ms p50\s+(?P<p50>\S+) "
                    r"p99\s+(?P<p99>\S+)")
SWEEP = re.compile(r"^(?P<run>.*\S) (?P<key>[a-z_]+)=(?P<value>\S+)$")


def parse(path):
    """The scenario's title line and its runs: (name, columns, flows' (goodput, done)),
    and the lines of its `streams` flows: (run, flow, streams, late, held, message
    streams' (id, priority, p50, p99))."""
    title, runs, streams = None, [], []
    for line in path.read_text().splitlines():
        if line.startswith("scenario "):
            title = line[len("scenario "):]
        elif line.startswith("run ") or line.startswith("not composable"):
            continue
        elif m := RUN.match(line):
            runs.append((m["name"], m.groupdict(), []))
        elif line.strip() and not line[0].isspace():
            # A run line without the run-level columns (a scenario whose `metrics` leaves
            # them out): its name alone.
            runs.append((line.strip(), {}, []))
        elif (m := FLOW.match(line)) and runs:
            runs[-1][2].append((float(m["goodput"]), m["done"], m["on_time"]))
        elif (m := STREAMS.match(line)) and runs:
            streams.append((runs[-1][0], m["flow"], m["n"], m["late"], m["held"], []))
        elif (m := STREAM.match(line)) and streams:
            streams[-1][5].append((m["id"], m["prio"], m["p50"], m["p99"]))
    if title is None:
        sys.exit(f"{path}: no `scenario` title line: is it the output of `ctp sim`?")
    return title, runs, streams


def cell(flows):
    """Each flow's goodput, completion time (when it finished) and on-time ratio (when it
    had a deadline), flows separated by ` / `."""
    if not flows:
        return "-"
    each = []
    for goodput, done, on_time in flows:
        parts = [f"{goodput:.2f} Mb/s"]
        if done != "-":
            parts.append(f"{float(done):.2f} s")
        if on_time is not None:
            parts.append(f"{float(on_time):.1f} % on time")
        each.append(", ".join(parts))
    return " / ".join(each)


def table(title, runs, streams):
    lines = [f"## {title}", ""]
    sweeps = [SWEEP.match(name) for name, _, _ in runs]
    if runs and all(sweeps):
        key = sweeps[0]["key"]
        values, rows = [], {}
        for m, (_, _, flows) in zip(sweeps, runs):
            if m["value"] not in values:
                values.append(m["value"])
            rows.setdefault(m["run"], {})[m["value"]] = cell(flows)
        lines.append(f"Each flow's goodput, completion time (and on-time ratio), flows separated by ` / `, by `{key}`.")
        lines.append("")
        lines.append("| run | " + " | ".join(f"{key}={v}" for v in values) + " |")
        lines.append("|---|" + "---|" * len(values))
        for run, by in rows.items():
            lines.append(f"| {run} | " + " | ".join(by.get(v, "") for v in values) + " |")
    else:
        lines.append("| run | efficiency | Jain | stability | aggregate Mb/s | each flow, Mb/s |")
        lines.append("|---|---|---|---|---|---|")
        for name, c, flows in runs:
            c = {k: c.get(k, "-") for k in ("effic", "jain", "stab", "aggr")}
            lines.append(f"| {name} | {c['effic']} | {c['jain']} | {c['stab']} | {c['aggr']} "
                         f"| {' / '.join(f'{g:.1f}' for g, _, _ in flows) or '-'} |")
    if streams:
        lines.append("")
        lines.append("Streams: messages that waited for a retransmission (late), those held by "
                     "another stream's, and the message streams' delays (ms; stream id, priority).")
        lines.append("")
        lines.append("| run | flow | streams | late | held by another | p50 / p99 delay per message stream |")
        lines.append("|---|---|---|---|---|---|")
        for run, flow, n, late, held, each in streams:
            delays = ", ".join(f"{i} (prio {p}): {a} / {b}" for i, p, a, b in each) or "-"
            lines.append(f"| {run} | {flow} | {n} | {late} | {held} | {delays} |")
    lines.append("")
    return lines


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} RESULTS_DIRECTORY (holding `ctp sim` outputs, *.txt)")
    files = sorted(pathlib.Path(sys.argv[1]).glob("*.txt"))
    if not files:
        sys.exit(f"{sys.argv[1]}: no *.txt result tables")
    out = ["# Shipped scenarios: results in brief", "",
           "Condensed from the full tables beside this file (`ctp sim NAME`, one file per "
           "scenario) by `tools/results-summary.py`.", ""]
    for f in files:
        out += table(*parse(f))
    print("\n".join(out))


if __name__ == "__main__":
    main()
