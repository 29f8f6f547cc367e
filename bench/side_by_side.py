"""One benchmark at two commits, side by side: runs alternate (base, new, base, new, …) so both
meet the same machine, and the figures of each side are printed as min / median / max.

Every figure moves with the machine (docs/benchmarks.md): a figure is compared only with one
measured beside it. This is how the table's side-by-side figures are taken.

    .venv/bin/python bench/side_by_side.py --base 57353d8 [--new HEAD] [--runs 3] -- \\
        bench/sender.py --paced paid --sends 10000

Each commit is checked out once (a detached `git worktree` under var/side-by-side/, sharing this
checkout's .venv) and gets databases of its own, `courier_sbs_<sha>` (created when missing, on the
server of DATABASE_URL or the benches' default), and a Redis db of its own (13 for the base, 14 for
the new commit), so neither sees the other's rows, limiter or queue. The bench runs `--runs 1` each
time; every `a / b / c` figure its summary prints is gathered run by run (each run's whole output
is kept in var/side-by-side/runs.log).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
PLACES = ROOT / "var" / "side-by-side"
DEFAULT_DATABASE = "postgres://postgres@127.0.0.1:5432/courier_bench"
REDIS_DBS = {"base": 13, "new": 14}
NUMBER = r"-?\d[\d,]*(?:\.\d+)?"
# A bench's summary figure: "a / b / c" (min / median / max); with --runs 1 the three are equal.
TRIPLE = re.compile(rf"({NUMBER}) / ({NUMBER}) / ({NUMBER})")


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def checkout(rev: str) -> tuple[str, Path]:
    """The commit's full sha and a worktree holding it (made once)."""
    sha = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    place = PLACES / sha[:12]
    if not (place / "manage.py").exists():
        PLACES.mkdir(parents=True, exist_ok=True)
        git("worktree", "add", "--detach", str(place), sha)
    venv = place / ".venv"
    if not venv.exists():
        venv.symlink_to(ROOT / ".venv")
    return sha, place


def database_for(sha: str, tag: str = "") -> str:
    """The commit's own database URL (`tag`: one of its own for this bench), created when missing."""
    base = urlsplit(os.environ.get("DATABASE_URL", DEFAULT_DATABASE))
    name = f"courier_sbs_{sha[:12]}" + (f"_{tag}" if tag else "")
    admin = urlunsplit(base._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return urlunsplit(base._replace(path=f"/{name}"))


LOAD = re.compile(r"\s*\(load [\d.]+\)")


def figures(output: str) -> dict[str, float]:
    """Each summary figure of one run, keyed by its line with the figure taken out, under the
    heading it is indented below (a bench that prints the same lines for several cases)."""
    found: dict[str, float] = {}
    heading = ""
    for line in output.splitlines():
        matches = list(TRIPLE.finditer(line))
        if not matches:
            if line.strip() and not line.startswith(" "):
                heading = LOAD.sub("", line.strip())  # the same heading whatever the load was
            continue
        label = re.sub(r"\s{2,}", " ", TRIPLE.sub("{}", line.strip()))
        if line.startswith("    ") and heading:
            label = f"{heading} {label}"
        for i, m in enumerate(matches):
            found[label + (f" #{i + 1}" if len(matches) > 1 else "")] = float(m.group(2).replace(",", ""))
    return found


def run(place: Path, side: str, database: str, bench: list[str]) -> dict[str, float]:
    env = {**os.environ, "DATABASE_URL": database, "REDIS_URL": f"redis://127.0.0.1:6379/{REDIS_DBS[side]}"}
    done = subprocess.run(
        [str(place / ".venv/bin/python"), *bench, "--runs", "1"], cwd=place, env=env, capture_output=True, text=True
    )
    with (PLACES / "runs.log").open("a") as log:  # every run's whole output, to read past the summary
        log.write(f"==== {side} {place.name} {' '.join(bench)}\n{done.stdout}{done.stderr}\n")
    if done.returncode:
        sys.stdout.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"side_by_side: {' '.join(bench)} failed at {side} (exit {done.returncode})")
    return figures(done.stdout)


def spread(values: list[float]) -> str:
    digits = 0 if all(abs(v) >= 100 for v in values) else 3 if all(abs(v) < 1 for v in values) else 1
    return " / ".join(f"{v:,.{digits}f}" for v in (min(values), statistics.median(values), max(values)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--new", default="HEAD")
    parser.add_argument("--runs", type=int, default=3, help="runs of each side, alternating")
    parser.add_argument("--db-tag", default="", help="databases of their own for this bench (one that refuses others' users)")
    parser.add_argument("bench", nargs=argparse.REMAINDER, help="-- bench/<name>.py [its arguments]")
    args = parser.parse_args()
    bench = args.bench[1:] if args.bench[:1] == ["--"] else args.bench
    if not bench:
        parser.error("name the bench after --, e.g. -- bench/sender.py --paced paid")
    sides = {}
    for side, rev in (("base", args.base), ("new", args.new)):
        sha, place = checkout(rev)
        sides[side] = (sha, place, database_for(sha, args.db_tag))
    results: dict[str, list[dict[str, float]]] = {"base": [], "new": []}
    for i in range(args.runs):
        for side, (sha, place, database) in sides.items():
            results[side].append(run(place, side, database, bench))
            print(f"run {i + 1} {side} ({sha[:7]}) done", flush=True)
    print(f"\n{' '.join(bench)}: min / median / max of {args.runs}, alternating")
    print(f"  base {sides['base'][0][:7]} | new {sides['new'][0][:7]}")
    keys = list(dict.fromkeys(k for side in ("base", "new") for r in results[side] for k in r))
    for key in keys:  # a figure only one side prints (its label changed) shows "—" on the other
        base = [r[key] for r in results["base"] if key in r]
        new = [r[key] for r in results["new"] if key in r]
        label = key.replace(" {}", "").replace("{}", "")
        print(f"  {label}\n      {spread(base) if base else '—'}  |  {spread(new) if new else '—'}")


if __name__ == "__main__":
    main()
