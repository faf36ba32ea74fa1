"""Rendering a large saved recording: HTML against text and JSON, wall time and peak RSS.

    .venv/bin/python bench/html_big.py --record /tmp/big.json --duration 420 --rate 1000 --threads 200
    .venv/bin/python bench/html_big.py --reuse /tmp/big.json \\
        [--variant before=/tmp/gilty-before] [--variant after=python] [--chromium] [--json FILE]

--record first records bench/targets/mixed32.py (--threads threads: 4 spinning, the rest napping
1-5 ms, so every thread changes state every few passes: runs grow with time) with
`gilty record --rate R --duration S -o FILE`, the way a user saves a long recording; --reuse takes a
recording saved before. Then, for each ``--variant NAME=DIR`` (a ``python/`` tree with its built
``_native``; default this checkout's), one after the other on the same file:

    gilty report FILE -o out.html        gilty report FILE -o out.txt        gilty report FILE --format json

each under /usr/bin/time -v: wall seconds and peak RSS (MiB), and the HTML's size. The figures that
matter are the ratios to the text render of the same variant in the same run. With --chromium, each
variant's page is then opened in headless Chromium (the DevTools harness of
tests/integration/test_html_chromium.py): seconds to its load event and the timeline bands drawn.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MIXED32 = os.path.join(HERE, "targets", "mixed32.py")
DEFAULT_TARGET_PYTHON = "/root/.pyenv/versions/3.12.1/bin/python3"
GILTY = "import sys; from gilty.cli import main; sys.exit(main())"


def gilty(*args: str) -> list:
    return ["/usr/bin/time", "-v", sys.executable, "-c", GILTY, *args]


def timed(pythonpath: str, *args: str) -> dict:
    """Wall seconds and peak RSS of one gilty command (from /usr/bin/time -v)."""
    env = {**os.environ, "PYTHONPATH": pythonpath}
    proc = subprocess.run(gilty(*args), env=env, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"gilty {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", proc.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    hours, minutes, seconds = (float(g or 0) for g in wall.groups())
    return {"wall_s": round(hours * 3600 + minutes * 60 + seconds, 2), "peak_rss_mib": round(int(rss.group(1)) / 1024, 1)}


def record(path: str, args: argparse.Namespace) -> None:
    cmd = [
        "record",
        "--rate",
        str(args.rate),
        "--duration",
        str(args.duration),
        "-o",
        path,
        "--",
        args.python,
        MIXED32,
        "--threads",
        str(args.threads),
        "--spinners",
        "4",
    ]
    print(f"recording {args.duration} s of {args.threads} threads at {args.rate} Hz into {path}", file=sys.stderr)
    print(json.dumps({"record": timed(os.path.join(REPO, "python"), *cmd)}), file=sys.stderr)


def shape(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    rec = data.get("recording", data)
    processes = rec["processes"]
    return {
        "file_mib": round(os.path.getsize(path) / 2**20, 1),
        "processes": len(processes),
        "threads": sum(len(p["runs"]) for p in processes),
        "passes": sum(len(p["times"]) for p in processes),
        "runs": sum(len(r["passes"]) for p in processes for r in p["runs"].values()),
    }


def chromium_load(pages: dict) -> dict:
    """Seconds until each page's load event in headless Chromium (the tests' DevTools harness),
    whether its script finished, and how many timeline bands it drew."""
    sys.path[:0] = [os.path.join(REPO, "tests"), os.path.join(REPO, "tests", "integration")]
    import time
    from pathlib import Path

    from test_html_chromium import Browser

    out = {}
    with tempfile.TemporaryDirectory() as profile:
        browser = Browser(Path(profile))
        try:
            for name, page in pages.items():
                start = time.monotonic()
                browser.open(Path(page))
                out[name] = {
                    "load_s": round(time.monotonic() - start, 2),
                    "ready": browser.js("document.body.dataset.ready") == "1",
                    "errors": len(browser.errors()),
                    "bands": browser.js("document.querySelectorAll('#timeline .tl-band').length"),
                }
        finally:
            browser.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--record", metavar="FILE", help="record a new recording into FILE first")
    source.add_argument("--reuse", metavar="FILE", help="a recording saved before (gilty record -o FILE.json)")
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--duration", type=float, default=420.0)
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--python", default=DEFAULT_TARGET_PYTHON, help="the target's interpreter")
    parser.add_argument(
        "--variant",
        action="append",
        metavar="NAME=DIR",
        help="a gilty python/ tree to import (repeatable; default: this checkout's python/)",
    )
    parser.add_argument("--chromium", action="store_true", help="also load each variant's page in headless Chromium")
    parser.add_argument("--json", metavar="FILE", help="also write the results here")
    args = parser.parse_args()

    path = args.record or args.reuse
    if args.record:
        record(path, args)
    results = {"recording": shape(path), "variants": {}}
    print(json.dumps(results["recording"]), flush=True)
    variants = [v.split("=", 1) for v in (args.variant or [f"this={os.path.join(REPO, 'python')}"])]
    with tempfile.TemporaryDirectory() as out:
        for name, tree in variants:
            row = {}
            for fmt, extra in (
                ("html", ["-o", f"{out}/x.html"]),
                ("text", ["-o", f"{out}/x.txt"]),
                ("json", ["--format", "json", "-o", f"{out}/x.json"]),
            ):
                row[fmt] = timed(os.path.abspath(tree), "report", path, *extra)
            row["html_mib"] = round(os.path.getsize(f"{out}/x.html") / 2**20, 1)
            os.rename(f"{out}/x.html", f"{out}/{name}.html")
            row["html_over_text"] = {
                "wall": round(row["html"]["wall_s"] / max(row["text"]["wall_s"], 1e-3), 2),
                "rss": round(row["html"]["peak_rss_mib"] / max(row["text"]["peak_rss_mib"], 1e-3), 2),
            }
            results["variants"][name] = row
            print(json.dumps({name: row}), flush=True)
        if args.chromium:
            results["chromium"] = chromium_load({name: f"{out}/{name}.html" for name, _tree in variants})
            print(json.dumps({"chromium": results["chromium"]}), flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
