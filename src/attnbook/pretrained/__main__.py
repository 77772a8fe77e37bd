"""``python -m attnbook.pretrained list | retrain NAME... | check NAME...`` (``--all``: every
entry). ``retrain`` trains the shipped models again and writes their weights and records into
the package; ``check`` retrains without writing and compares with the records (``make
pretrained-check``), exiting 1 when a record does not hold."""

from __future__ import annotations

import argparse
import sys

from . import PretrainedError, names, record, stale
from ._retrain import check, retrain


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnbook.pretrained", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the shipped models and their recorded scores")
    for command in ("retrain", "check"):
        p = sub.add_parser(command, help=f"{command} shipped models")
        p.add_argument("names", nargs="*", metavar="NAME", choices=[*names(), []])
        p.add_argument("--all", action="store_true", help="every shipped model")
        p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    args = parser.parse_args(argv)
    if args.command == "list":
        for name in names():
            try:
                rec = record(name)
            except ValueError as err:
                print(f"{name}: {err}")
                continue
            m, changed = rec["metrics"], stale(name)
            print(
                f"{name}: exact match {m['exact_match']:.3f}, BLEU {m['bleu']:.1f}, chrF "
                f"{m['chrf']:.1f}; {rec['bytes'] / 1024:.0f} KiB; {rec['command']}"
                + (f"; STALE: {changed}" if changed else "")
            )
        return 0
    chosen = list(names()) if args.all else args.names
    if not chosen:
        parser.error(f"{args.command}: name a model ({', '.join(names())}) or give --all")
    failed = []
    for name in chosen:
        if args.command == "retrain":
            try:
                rec = retrain(name, threads=args.threads)
            except PretrainedError as err:  # stopped by a signal: the rest is not trained
                print(f"error: {err}", file=sys.stderr)
                return 1
            m = rec["metrics"]
            print(
                f"{name}: {rec['training']['steps']} steps in {rec['training']['seconds']} s; "
                f"exact match {m['exact_match']:.3f}, BLEU {m['bleu']:.1f}, chrF {m['chrf']:.1f}; "
                f"wrote weights/{rec['file']} ({rec['bytes'] / 1024:.0f} KiB)",
                flush=True,
            )
        else:
            problems = check(name, threads=args.threads)
            failed += problems
            print(
                f"{name}: " + ("; ".join(problems) if problems else "the record holds"), flush=True
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
