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
SWEEP = re.compile(r"^(?P<run>.*\S) (?P<key>[a-z_]+)=(?P<value>\S+)$")


def parse(path):
    """The scenario's title line and its runs: (name, columns, flows' (goodput, done))."""
    title, runs = None, []
    for line in path.read_text().splitlines():
        if line.startswith("scenario "):
            title = line[len("scenario "):]
        elif line.startswith("run ") or line.startswith("not composable"):
            continue
        elif m := RUN.match(line):
            runs.append((m["name"], m.groupdict(), []))
        elif (m := FLOW.match(line)) and runs:
            runs[-1][2].append((float(m["goodput"]), m["done"], m["on_time"]))
    if title is None:
        sys.exit(f"{path}: no `scenario` title line: is it the output of `ctp sim`?")
    return title, runs


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


def table(title, runs):
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
            lines.append(f"| {name} | {c['effic']} | {c['jain']} | {c['stab']} | {c['aggr']} "
                         f"| {' / '.join(f'{g:.1f}' for g, _, _ in flows) or '-'} |")
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
