"""Tamper with a sealed tenant and watch the ledger name it (issue 3 item 7).

Runs in a temporary folder in well under a second: seals three records, edits one record's
words on disk, leaves a torn fragment as a crash mid-append would, then shows verify naming
the altered record and reporting the fragment as a torn tail (a crash, not tampering: no
entry, no break), and the next seal quarantining it.
Paste it into a notebook cell or run ``python examples/ledger_tamper.py``.
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
from pathlib import Path


def _here() -> Path:
    """This file's folder, or the working folder when pasted into a notebook cell."""
    try:
        return Path(__file__).resolve().parent
    except NameError:
        return Path.cwd()


try:
    import merkle_memory  # noqa: F401
except ImportError:  # running from a checkout without installing it
    for candidate in (_here().parent, Path.cwd(), Path.cwd().parent):
        if (candidate / "merkle_memory" / "__init__.py").is_file():
            sys.path.insert(0, str(candidate))
            break

from merkle_memory.ledger import Tenant  # noqa: E402 (after the path fallback above)


def show(title: str, report: dict[str, object]) -> None:
    keep = ("ok", "chain", "entries", "broken_at", "sealed", "altered", "unsealed", "torn_tail")
    print(f"{title}: " + ", ".join(f"{k}={report[k]!r}" for k in keep if k in report))


def demo(folder: Path) -> None:
    tenant = Tenant(folder / "agents" / "cc")
    for rid, words in (("m1", "we chose sqlite"), ("m2", "ship on friday"), ("m3", "no cloud")):
        tenant.save({"id": rid, "summary": words, "category": "decision"})
    show("1. after three saves", tenant.verify().to_dict())

    path = tenant.memory_dir / "m2.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    record["summary"] = "ship next year"  # someone rewrites history
    path.write_text(json.dumps(record), encoding="utf-8")
    show("2. m2 edited on disk", tenant.verify().to_dict())

    with tenant.ledger.path.open("ab") as fh:  # a crash in the middle of an append
        fh.write(b'{"content_sha256":"ab12')
    (tenant.memory_dir / "m4.json").write_text(json.dumps({"id": "m4", "summary": "new"}))
    show("3. torn fragment left", tenant.verify().to_dict())

    result = tenant.seal()  # quarantines the fragment, adopts m4, never re-seals m2
    print(f"4. seal adopted {list(result.sealed_ids)}; ledger.torn holds:")
    print("   " + tenant.ledger.torn_path.read_text(encoding="utf-8").replace("\n", "\n   "))
    show("5. after seal", result.report.to_dict())
    print(
        "Look at: 'altered' names m2 from step 2 on; step 3 reports the fragment as a torn"
        " tail, not an entry; step 5 has it in ledger.torn and m4 sealed."
    )


if __name__ == "__main__" or "__file__" not in globals():
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    with tempfile.TemporaryDirectory() as tmp:
        demo(Path(tmp))
