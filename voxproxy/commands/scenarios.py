"""``voxproxy scenarios``: the built-in scenarios ``voxproxy load`` takes by name, and the
clips a scenario's steps say, with what each is; ``--json`` for scripts.

Read from the fixtures directory the commands use (:func:`voxproxy.clips.fixtures_dir`:
``VOXPROXY_FIXTURES`` or the package's own).
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "scenarios",
        help="list the built-in scenarios (voxproxy load NAME) and clips (say: NAME)",
        description="The scenarios voxproxy load plays by name, and the clips a scenario's "
        "steps can say or make (say, barge_in, interject, noise), read from the fixtures "
        "directory the commands use.",
    )
    p.add_argument("--json", action="store_true", help="print them as one JSON document")
    p.set_defaults(func=run)


def listing() -> dict[str, Any]:
    """The built-in scenarios, the clips and where the testbench's scenarios are."""
    from voxproxy.clips import fixtures_dir, load_clips
    from voxproxy.loadgen.scenario import builtin_names, find_scenario
    from voxproxy.loadgen.steps import DEFAULT_TAIL_MS, caller_audio_s, longest_call_s

    scenarios = []
    for name in builtin_names():
        scenario, base = find_scenario(name)
        steps = scenario.caller_steps(base)
        scenarios.append(
            {
                "name": name,
                "steps": [s.action for s in scenario.steps],
                "caller_audio_s": round(caller_audio_s(steps), 1),
                "longest_call_s": round(longest_call_s(steps, DEFAULT_TAIL_MS), 1),
                "noise": scenario.noise.clip if scenario.noise is not None else None,
                "description": " ".join(scenario.description.split()),
            }
        )
    clips = [
        {
            "name": c.name,
            "role": c.role,
            "kind": c.kind,
            "duration_s": round(c.duration_ms / 1000, 1),
            "text": c.text,
        }
        for c in load_clips().values()
    ]
    testbench = fixtures_dir() / "testbench"
    return {
        "scenarios": scenarios,
        "clips": clips,
        "testbench": {
            "directory": str(testbench),
            "scenarios": sorted(p.name for p in testbench.glob("*.yaml")),
        },
    }


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.text import Text

    found = listing()
    if args.json:
        print(json.dumps(found, indent=1, ensure_ascii=False))
        return 0
    console = Console()
    scenarios = [
        [
            sc["name"],
            ", ".join(sc["steps"]) + (f"; noise {sc['noise']}" if sc["noise"] else ""),
            f"{sc['caller_audio_s']:.0f} s",
            f"{sc['longest_call_s']:.0f} s",
            sc["description"].split(". ")[0].rstrip("."),
        ]
        for sc in found["scenarios"]
    ]
    clips = [
        [c["name"], c["role"], c["kind"], f"{c['duration_s']:.1f} s", c["text"]]
        for c in found["clips"]
    ]
    for title, columns, rows, caption in (
        (
            "built-in scenarios: voxproxy load NAME ... (or a YAML file of your own)",
            ["name", "steps", "audio", "at most", "what it measures"],
            scenarios,
            "audio: what the caller says, and its silences; at most: with every "
            "wait for the agent at its timeout; --json: the whole descriptions",
        ),
        (
            "clips: say / barge_in / interject NAME in a step, noise: {clip: NAME}",
            ["name", "role", "kind", "length", "text"],
            clips,
            None,
        ),
    ):
        console.print(_table(title, columns, rows, console.width, caption=caption))
    bench = found["testbench"]
    console.print(
        Text(
            f"outcome testbench: {len(bench['scenarios'])} scenarios in {bench['directory']} "
            "(by path; they need the testbench's mock agent: benchmarks/testbench.py)"
        )
    )
    return 0


def _table(
    title: str, columns: list[str], rows: list[list[str]], width: int, caption: str | None = None
) -> Any:
    """One line a row: every column as wide as its widest cell (the steps at most 28),
    the last one the rest of the line, cut with an ellipsis."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(
        title=title,
        title_justify="left",
        caption=caption,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=0,
    )
    used = 0
    for k, name in enumerate(columns[:-1]):
        natural = max(len(name), *(len(row[k]) for row in rows))
        fixed = min(natural, 28) if name == "steps" else natural
        used += fixed + 1  # and the separator
        right = name in ("audio", "at most", "length")
        table.add_column(
            name,
            width=fixed,
            no_wrap=True,
            overflow="ellipsis",
            justify="right" if right else "left",
        )
    table.add_column(columns[-1], no_wrap=True, overflow="ellipsis", max_width=max(8, width - used))
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    return table
