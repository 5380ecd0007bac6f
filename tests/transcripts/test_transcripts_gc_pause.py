"""``import_file`` pauses Python's cyclic garbage collector while it reads a file
(``transcripts._common.paused_collector``) and leaves it as it found it."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import fork_child, held_by_another_thread

from merkle_memory._progress import ProgressCallback
from merkle_memory.errors import TranscriptFormatError
from merkle_memory.transcripts import FORMATS, import_file
from merkle_memory.transcripts._common import _PAUSES, ImportResult, paused_collector

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "claude_code_session.jsonl"


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_paused_inside_and_enabled_again_after() -> None:
    gc.enable()
    with paused_collector():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_enabled_again_after_an_error() -> None:
    gc.enable()
    with pytest.raises(KeyError), paused_collector():
        raise KeyError("x")
    assert gc.isenabled()


def test_a_disabled_collector_is_left_disabled() -> None:
    gc.disable()
    with paused_collector():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_pauses_enable_once_the_last_one_ends() -> None:
    """Two imports overlapping in two threads: the collector stays paused until both end."""
    gc.enable()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[tuple[str, bool]] = []

    def first() -> None:
        with paused_collector():
            first_in.set()
            second_in.wait(5)
        seen.append(("first left", gc.isenabled()))
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with paused_collector():
            second_in.set()
            first_out.wait(5)
            seen.append(("second inside", gc.isenabled()))
        seen.append(("second left", gc.isenabled()))

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == [("first left", False), ("second inside", False), ("second left", True)]


def test_a_child_forked_during_another_threads_import_has_the_collector_enabled() -> None:
    """Another thread inside an import while the main thread forks: that import does not
    exist in the child, whose collector is enabled and whose own imports pause and restore
    it; the parent still counts the thread's import until it ends."""
    gc.enable()

    def child() -> None:
        assert (gc.isenabled(), _PAUSES.depths, _PAUSES.disabled) == (True, {}, False)
        with paused_collector():
            assert not gc.isenabled()
        assert (gc.isenabled(), _PAUSES.depths) == (True, {})

    with held_by_another_thread(paused_collector):
        before = dict(_PAUSES.depths)
        fork_child(child)()
        assert (gc.isenabled(), _PAUSES.depths, _PAUSES.disabled) == (False, before, True)
        assert list(before.values()) == [1]
    assert (gc.isenabled(), _PAUSES.depths, _PAUSES.disabled) == (True, {}, False)


def test_a_child_forked_inside_an_import_keeps_only_its_own() -> None:
    """Forked by a thread inside an import (a progress callback may fork) while another
    thread is inside one too: the child keeps the forking thread's import, paused until it
    ends, and forgets the other; the parent waits for both."""
    gc.enable()
    with held_by_another_thread(paused_collector):
        with contextlib.ExitStack() as own:
            own.enter_context(paused_collector())
            me = threading.get_ident()

            def child() -> None:
                assert (gc.isenabled(), _PAUSES.depths) == (False, {me: 1})
                own.close()  # the forking thread's import ends in the child
                assert (gc.isenabled(), _PAUSES.depths, _PAUSES.disabled) == (True, {}, False)

            fork_child(child)()
        assert (gc.isenabled(), len(_PAUSES.depths)) == (False, 1)
    assert (gc.isenabled(), _PAUSES.depths) == (True, {})


def test_import_file_reads_with_the_collector_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    gc.enable()
    importer = FORMATS["claude-code"]
    read_path = importer.read_path
    assert read_path is not None
    states: list[bool] = []

    def spy(path: Path, progress: ProgressCallback | None) -> ImportResult:
        states.append(gc.isenabled())
        return read_path(path, progress)

    monkeypatch.setitem(FORMATS, "claude-code", dataclasses.replace(importer, read_path=spy))
    result = import_file(EXAMPLE, "claude-code")
    assert (states, gc.isenabled(), len(result.nodes)) == ([False], True, 10)


def test_import_file_enables_it_again_after_a_refusal(tmp_path: Path) -> None:
    gc.enable()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"parentUuid": null}\nnot json\n', encoding="utf-8")
    with pytest.raises(TranscriptFormatError):
        import_file(bad, "claude-code")
    assert gc.isenabled()
