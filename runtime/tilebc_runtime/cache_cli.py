"""`tilebc cache info|list|clear|prune`: look after the cubin cache from the command line.

`add_cache_parser(subparsers)` adds the command to an argparse CLI; `main(argv)` runs it alone
(`python -m tilebc_runtime.cache_cli info`).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import List, Optional

from .cache import CubinCache, parse_size


def add_cache_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("cache", help="inspect or clean the cubin cache",
                                   description="Inspect or clean the cubin cache "
                                   "(location: TILEBC_CACHE_DIR, or the platform's user cache dir).")
    actions = parser.add_subparsers(dest="cache_action", required=True)
    actions.add_parser("info", help="location, size, bound and entry count")
    listing = actions.add_parser("list", help="one line per entry, least recently used first")
    listing.add_argument("--json", action="store_true", help="print JSON lines")
    actions.add_parser("clear", help="remove every entry")
    prune = actions.add_parser("prune", help="remove corrupt entries, then LRU entries over the bound")
    prune.add_argument("--max-size", type=parse_size, default=None,
                       help="size bound for this prune, e.g. 500M (default: the cache's bound)")
    parser.set_defaults(handler=run_cache_command)
    return parser


def run_cache_command(args: argparse.Namespace, cache: Optional[CubinCache] = None) -> int:
    cache = cache or CubinCache.from_environment()
    out = sys.stdout
    if not cache.disk_enabled:
        if args.cache_action == "info":
            out.write(f"location: none ({cache.reason})\n")
            out.write(f"remote: {cache.remote.url if cache.remote else 'none'}\n")
            return 0
        sys.stderr.write(f"tilebc cache: no disk cache ({cache.reason})\n")
        return 1
    action = args.cache_action
    if action == "info":
        entries = cache.disk_entries()
        total = sum(info.size for info in entries)
        out.write(f"location: {cache.directory}\nentries: {len(entries)}\n"
                  f"size: {total} bytes ({_human(total)})\n"
                  f"bound: {cache.max_bytes} bytes ({_human(cache.max_bytes)})\n")
        for backend, record in sorted(cache.toolchain().get("backends", {}).items()):
            out.write(f"toolchain {backend}: {record.get('identity', '?')}\n")
        problem = cache.toolchain_problem()
        if problem not in (None, "missing"):
            out.write(f"toolchain: {cache.directory / 'toolchain.json'} {problem}; ignored "
                      "(rewritten by the next compile, removed by `tilebc cache clear`)\n")
        out.write(f"remote: {cache.remote.url if cache.remote else 'none'}\n")
    elif action == "list":
        for info in cache.disk_entries():
            fields = (info.metadata or {}).get("fields", {})
            row = {"key": info.key, "size": info.size, "last_used": info.last_used,
                   "entry": fields.get("entry"), "arch": fields.get("arch"),
                   "toolchain": fields.get("toolchain"), "valid": info.metadata is not None}
            if args.json:
                out.write(json.dumps(row, sort_keys=True) + "\n")
            else:
                used = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.last_used))
                state = "" if row["valid"] else "  CORRUPT"
                out.write(f"{info.key[:16]}  {info.size:>9}  {used}  {row['arch']}  "
                          f"{row['toolchain']}  {row['entry']}{state}\n")
    elif action == "clear":
        out.write(f"removed {cache.clear()} entries from {cache.directory}\n")
    elif action == "prune":
        removed = cache.prune(max_bytes=args.max_size)
        out.write(f"removed {len(removed)} entries; {_human(cache.total_bytes())} left\n")
    return 0


def _human(size: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} B"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="tilebc")
    add_cache_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
