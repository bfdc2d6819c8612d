"""``edgerl replay REC.mcap [--out plot.png]``: summarise and plot a recorded session."""

from __future__ import annotations

import argparse
from pathlib import Path

from edgerl.apps.cli import flags
from edgerl.apps.cli.errors import CliError

HELP = "summarise and plot an MCAP recording made by `edgerl deploy --record`"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("recording", type=Path, help="the .mcap file")
    out = flags.add_output_flags(p, json="the summary as JSON")
    out.add_argument("--out", type=Path, default=None,
                     help="write a PNG plot here (default: REC with .png suffix)")
    out.add_argument("--no-plot", action="store_true", help="only print the summary")


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.output import print_json, print_table

    try:
        from edgerl_ros.recording import plot_recording, read_recording, summarize_recording
    except ImportError as exc:
        raise CliError(f"ROS 2 support is not installed ({exc})") from exc
    try:
        data = read_recording(args.recording)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    if not data:
        raise CliError(f"{args.recording}: the recording holds no messages")
    rows = summarize_recording(data)
    plot = None
    if not args.no_plot:
        plot = plot_recording(data, args.out or args.recording.with_suffix(".png"))
    if args.json:
        print_json({"topics": rows, "plot": str(plot) if plot else None})
    else:
        print_table(rows, title=str(args.recording))
        if plot:
            print(f"plot: {plot}")
    return 0
