"""What FTS5 buys ``bridge history --search``: the Archive API's search over 100,000 archived
messages against a plain SQLite ``LIKE '%word%'`` scan of the same rows (goal: p50 and p99
<= 0.1x).

Messages of 10-60 words drawn from a Zipf-distributed vocabulary of 20,000 made-up words
(seeded), archived through ``Archive.add`` in batches of 1,000. Each query is one word drawn
uniformly from the vocabulary (common and rare alike) or, one query in five, the first four
letters of one as a prefix (``abcd*``). Both sides return the newest 100 matches; each query
runs both ways, in alternating order. Asserts nothing.
Run: ``.venv/bin/python bench/history_search.py [--quick]``.
"""

from __future__ import annotations

import argparse
import itertools
import random
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
for entry in (str(BENCH), str(REPO)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from _common import median, pct  # noqa: E402

from bridgecli.hoststate.archive import Archive  # noqa: E402

MESSAGES = 100_000
VOCABULARY = 20_000
LIMIT = 100
GOAL = 0.1


def _words(rng: random.Random, count: int) -> list[str]:
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
    found: set[str] = set()
    while len(found) < count:
        found.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(2, 4))))
    return sorted(found)


def fill(archive: Archive, rng: random.Random, words: list[str], count: int) -> None:
    """Archive ``count`` messages between a few entities, as the gateway's writer would."""
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(words))))
    gids = [str(uuid.uuid4()) for _ in range(6)]
    now = time.time() - count
    batch = []
    for i in range(count):
        text = " ".join(rng.choices(words, cum_weights=cumulative, k=rng.randint(10, 60)))
        sender, recipient = rng.sample(gids, 2)
        batch.append(
            {
                "msg_id": str(uuid.uuid4()),
                "copy_of": None,
                "direction": "received",
                "owner": recipient,
                "sender": sender,
                "sender_label": f"agent-{gids.index(sender)}",
                "sender_host": "benchhost",
                "recipient": recipient,
                "channel": None,
                "kind": "SEND",
                "in_reply_to": None,
                "turn": None,
                "content": text,
                "ts": now + i,
                "archived_at": now + i,
                "user_id": None,
            }
        )
        if len(batch) == 1000:
            archive.add(batch)
            batch = []
    archive.add(batch)


def main(quick: bool = False) -> list[dict]:
    """Rows for bench/run_all.py: search p50 and p99, each against the LIKE scan's."""
    count, queries = (20_000, 60) if quick else (MESSAGES, 300)
    rng = random.Random(7)
    words = _words(rng, VOCABULARY)
    root = Path(tempfile.mkdtemp(prefix="bhist", dir="/tmp"))
    try:
        archive = Archive(root / "archive.db")
        started = time.perf_counter()
        fill(archive, rng, words, count)
        filled = time.perf_counter() - started
        size = archive.size()
        plain = sqlite3.connect(root / "archive.db")
        like_sql = "SELECT * FROM messages WHERE content LIKE ? ORDER BY id DESC LIMIT ?"
        fts: list[float] = []
        like: list[float] = []
        hits: list[int] = []
        for i in range(queries + 10):
            word = rng.choice(words)
            text, pattern = (word[:4] + "*", f"%{word[:4]}%") if i % 5 == 4 else (word, f"%{word}%")
            timed = {}
            order = ("fts", "like") if i % 2 == 0 else ("like", "fts")
            for side in order:
                t0 = time.perf_counter()
                if side == "fts":
                    found = len(archive.history(search=text, limit=LIMIT))
                else:
                    plain.execute(like_sql, (pattern, LIMIT)).fetchall()
                timed[side] = (time.perf_counter() - t0) * 1000
            if i >= 10:  # the first ten warm the page cache
                fts.append(timed["fts"])
                like.append(timed["like"])
                hits.append(found)
        plain.close()
        archive.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    note = (
        f"{count:,} messages ({size / 1e6:.0f} MB with the index, archived in {filled:.1f} s), "
        f"{queries} queries (1 in 5 a prefix), newest {LIMIT} matches, interleaved; "
        f"median hits {median(hits):g}"
    )
    rows = []
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        ours, base = pct(fts, q), pct(like, q)
        ratio = round(ours / base, 3)
        rows.append(
            {
                "benchmark": "history_search",
                "metric": f"search {name}, Archive.history(search=...)",
                "value": round(ours, 3),
                "unit": "ms",
                "baseline": f"LIKE '%word%' scan {name} {base:.2f} ms",
                "ratio": ratio,
                "note": f"goal <={GOAL}x: {'met' if ratio <= GOAL else 'MISSED'}; {note}",
            }
        )
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 messages, 60 queries (a smoke run)")
    for result in main(parser.parse_args().quick):
        print(f"{result['metric']}: {result['value']} ms vs {result['baseline']} -> {result['ratio']}x")
        print(f"  {result['note']}")
