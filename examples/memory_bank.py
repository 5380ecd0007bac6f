"""A content-addressed memory bank in five minutes (DESIGN section 5, EP-0106).

Runs in a temporary folder (deleted at the end), in under a second; also works pasted into a
notebook cell. What to look at in the output:

1. the id of a memory is the SHA-256 of its canonical JSON, and saving it again is a no-op;
2. the file name and bytes on disk (read-only, RFC 8785, one object per file);
3. consolidation links the originals (``mm://memory/<id>``) and moves them to ``archive/``;
4. ``verify`` names the file a "tamperer" edited, and the ledger calls that memory altered;
5. a legacy file (random UUID, ``status``, link objects) migrated to a content-addressed one.

Run: ``python examples/memory_bank.py``
"""

from __future__ import annotations

import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path


def _here() -> Path:
    """The folder of this script, or the working directory when pasted into a notebook."""
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

from merkle_memory.bank import MemoryBank  # noqa: E402 (after the path fallback above)
from merkle_memory.bank.memory import Memory  # noqa: E402


def main() -> None:
    """Walk through save, list, consolidate, verify and migrate in a temp folder."""
    with tempfile.TemporaryDirectory() as tmp:
        bank = MemoryBank(Path(tmp) / "bank")
        when = datetime(2026, 5, 29, 12, 0, tzinfo=UTC)
        facts = [
            Memory("fact", "project", "Project uses FastAPI", ["stack"], when, "session_123"),
            Memory("fact", "project", "Tests run with pytest", ["stack"], when),
        ]
        ids = [bank.save(m) for m in facts]
        print("1. saved ids:", *ids, sep="\n   ")
        print("   saving again returns the same id:", bank.save(facts[0]) == ids[0])

        path = Path(tmp) / "bank" / "memories" / facts[0].file_name
        print("2. file:", path.name)
        print("   bytes:", path.read_text(encoding="utf-8").strip())

        summary = bank.consolidate(ids, "Stack: FastAPI, tested with pytest", timestamp=when)
        print("3. consolidated into", summary)
        print("   its links:", *bank.get(summary).links, sep="\n     ")
        for item in bank.memories(archived=None):
            print(f"   {item.status:<8} {item.path}")

        victim = Path(tmp) / "bank" / bank.locate(summary).path
        victim.chmod(0o644)
        victim.write_text(victim.read_text(encoding="utf-8").replace("pytest", "unittest"))
        report = bank.verify()
        print("4. verify ok?", report.ok)
        for problem in report.problems:
            print(f"   TAMPERED {problem.path}: {problem.kind}")
        print("   ledger altered:", report.ledger["altered"] if report.ledger else None)

        legacy = Path(tmp) / "bank" / "memories" / "old-note.json"
        legacy.write_text(
            json.dumps(
                {
                    "id": "5f2c9a40-8d1e-4c6b-b2f7-3e9d1a7c4b20",
                    "type": "insight",
                    "scope": "project",
                    "content": "Prefers small PRs",
                    "timestamp": "2026-04-02T08:30:00",
                    "links": [{"uri": f"mm://memory/{ids[0]}", "relation": "supports"}],
                    "status": "pending_approval",
                }
            ),
            encoding="utf-8",
        )
        migration = bank.migrate()
        for moved in migration.files:
            print(f"5. migrated {moved.path} -> {moved.new_path}")
            print("   naive timestamp read as UTC:", moved.naive_timestamp)
            print("   links:", bank.get(moved.id).links)


if __name__ == "__main__":
    main()
