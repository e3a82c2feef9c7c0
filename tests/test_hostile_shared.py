"""Files another user of the group (or another node) leaves in a shared results folder,
crafted against the code: links, FIFOs, absurd values, terminal escapes. Each is refused
or read as no trainer's, in one line, without hanging, following a link or writing
outside the folder."""

import io
import json
import math
import os
import sys
from contextlib import redirect_stdout
from pathlib import Path
from unittest.mock import patch

import pytest
from fakes import write_fake_run
from hypothesis import given, settings
from hypothesis import strategies as st
from test_resume import PACK, deadline

from initmem import cli
from initmem.errors import InputError
from initmem.markup import InertStream, terminal
from initmem.plan import grid
from initmem.records import archive, heartbeat, status
from initmem.records.verify import DAMAGED, verify_folders, verify_run
from initmem.untrusted import read_bytes


@pytest.fixture
def root(tmp_path) -> Path:
    (tmp_path / "shared").mkdir()
    return tmp_path / "shared"


def lock_of(root: Path) -> Path:
    return root / f"{PACK.key}.lock"


@pytest.mark.parametrize("dangling", [False, True])
def test_a_planted_lock_link_is_refused_and_its_target_untouched(tmp_path, root, dangling):
    target = tmp_path / "victim.txt"
    if not dangling:
        target.write_text("the user's own file\n")
    lock_of(root).symlink_to(target)
    with (deadline(10), pytest.raises(InputError, match="a symbolic link; a lock is a file"),
          heartbeat.held(root, PACK, root / "pack.json")):
        pytest.fail("trained under a planted lock")
    assert (target.read_text() == "the user's own file\n") if not dangling else not target.exists()


def test_a_lock_hard_linked_to_another_file_is_refused(tmp_path, root):
    target = tmp_path / "victim.txt"
    target.write_text("kept\n")
    os.link(target, lock_of(root))
    with (pytest.raises(InputError, match="a hard link to another file"),
          heartbeat.held(root, PACK, root / "pack.json")):
        pytest.fail("trained under a planted lock")
    assert target.read_text() == "kept\n"


@pytest.mark.parametrize("plant", ["fifo", "dev-zero", "large", "link"])
def test_a_heartbeat_that_is_no_small_file_reads_as_none_at_once(tmp_path, root, plant):
    path = heartbeat.path_of(root, PACK)
    if plant == "fifo":
        os.mkfifo(path)  # nobody writes it: an open or read would block forever
    elif plant == "dev-zero":
        path.symlink_to("/dev/zero")  # read without bound, it fills the memory
    elif plant == "large":
        path.write_bytes(b" " * (heartbeat.MAX_BYTES + 1))
    else:
        (tmp_path / "elsewhere.json").write_text(json.dumps(BEAT))
        path.symlink_to(tmp_path / "elsewhere.json")
    with deadline(10):
        assert heartbeat.read(path) is None
        # and the trainer goes on to beat there (replacing the planted file, not its target)
        with heartbeat.held(root, PACK, root / "pack.json"):
            assert heartbeat.read(path)["pid"] == os.getpid()
    assert not path.exists()
    if plant == "link":
        assert json.loads((tmp_path / "elsewhere.json").read_text()) == BEAT


def test_read_bytes_says_what_a_planted_file_is(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to("/dev/zero")
    with deadline(10):
        for name, says in [("fifo", "a FIFO, not a regular file"), ("link", "a symbolic link")]:
            with pytest.raises(InputError, match=f"{tmp_path / name}: {says}"):
                read_bytes(tmp_path / name, 100, "a heartbeat")
    with pytest.raises(InputError, match="a folder, not a regular file"):
        read_bytes(tmp_path, 100, "a heartbeat")


BEAT = {"pid": 7, "host": "h", "pack": "x", "start": 1.0, "beat": 2.0, "epoch": 1,
        "epochs": 3, "epoch_s": 1.5}


@pytest.mark.parametrize(("field", "value"), [
    ("pid", 2**70), ("pid", 2**22 + 1), ("beat", math.inf), ("beat", math.nan),
    ("start", -math.inf), ("epochs", 0), ("epoch", -1), ("epoch_s", 1e300),
    ("epoch_s", math.nan), ("part", 0), ("parts", 10**9), ("host", "h" * 1001)])
def test_a_heartbeat_of_absurd_values_reads_as_none(tmp_path, field, value):
    """Values that ended status and train in OverflowError, ValueError, ZeroDivisionError."""
    path = tmp_path / f"x{heartbeat.SUFFIX}"
    path.write_text(json.dumps(BEAT))
    assert heartbeat.read(path) == BEAT
    path.write_text(json.dumps({**BEAT, field: value}))  # json writes NaN, Infinity
    assert heartbeat.read(path) is None
    path.write_text(json.dumps(BEAT).replace('"beat": 2.0', '"beat": 1e309'))  # inf
    assert heartbeat.read(path) is None


ESCAPES = ["\x1b[2J\x1b[H", "\x1b]8;;http://x\x07link\x1b]8;;\x07", "\x1b]52;c;ZWNobw==\x07",
           "a\rb", "x\ny", "\u202eevil\u202c", "\x9b2J"]


@pytest.mark.parametrize("text", ESCAPES)
def test_terminal_escapes_every_control_and_bidi_character(text):
    shown = terminal(text)
    assert shown.isprintable() and "\\" in shown
    assert terminal("héllo wörld, 東京\t") == "héllo wörld, 東京\\t"


def test_status_prints_a_heartbeats_fields_as_a_terminal_shows_them():
    trainer = ["\x1b[2Jpack", "live", "7", "host\x1b]52;c;ZWNobw==\x07", "\u202eended\r"]
    lines = status._table([["pack", "state", "pid", "host", "ended"], trainer])
    assert all(line.isprintable() for line in lines), lines
    assert "\\x1b]52;c;ZWNobw==\\x07" in lines[1] and "\\u202eended\\r" in lines[1]


@given(st.text())
def test_the_inert_stream_passes_on_only_printable_text_newlines_and_tabs(text):
    out = io.StringIO()
    assert InertStream(out).write(text) == len(text)
    assert all(line.isprintable() for line in out.getvalue().replace("\t", "").split("\n"))
    if text.replace("\n", "").replace("\t", "").isprintable():
        assert out.getvalue() == text  # what is already inert passes unchanged


@pytest.mark.parametrize("text", ESCAPES)
def test_every_command_prints_inert_whatever_line_prints_a_files_text(monkeypatch, capsys,
                                                                      text):
    """Not one command's lines audited one by one: the command line's streams are inert,
    so a line that forgets `terminal` prints a file's text inert all the same."""
    monkeypatch.setattr(grid, "main", lambda args: print(text) or print(text, file=sys.stderr))
    assert cli.main(["grid"]) == 0
    out, err = capsys.readouterr()
    assert out == err and out.endswith("\n")
    assert out[:-1].replace("\n", "").isprintable(), out  # newlines pass: see InertStream
    assert sys.stdout is not None and not isinstance(sys.stdout, InertStream)


def test_an_error_quoting_a_files_text_prints_inert(tmp_path, capsys):
    config = tmp_path / "\x1b[2Jconfig\u202e.yaml"
    assert cli.main(["grid", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.endswith("\n") and err[:-1].isprintable(), err
    assert "\\x1b[2Jconfig\\u202e.yaml" in err


@pytest.mark.parametrize("plant", ["fifo", "dev-zero"])
def test_a_record_file_that_is_no_regular_file_is_damage_not_a_hang(tmp_path, plant):
    run = PACK.runs[0]
    write_fake_run(tmp_path, run)
    summary = tmp_path / run.run_dir / "summary.parquet"
    summary.unlink()
    if plant == "fifo":
        os.mkfifo(summary)
    else:
        summary.symlink_to("/dev/zero")
    with deadline(10):
        finding, _ = verify_run(tmp_path, run)
    says = "a FIFO, not a regular file" if plant == "fifo" else "a symbolic link"
    assert finding.state == DAMAGED and says in finding.detail, finding


@pytest.mark.parametrize("plant", ["link-out", "loop"])
def test_a_run_folder_leading_out_is_damage_a_linked_stray_never_entered(tmp_path, root,
                                                                         plant):
    """A run's folder (or any folder under the records) that is a link out of them, or a
    loop of links: the run is damaged, never read there (another folder's records would
    pass as its own), and verify ends in time; a linked folder no run has is never entered
    (rglob's "**" does not follow links)."""
    run = PACK.runs[0]
    elsewhere = tmp_path / "elsewhere"
    write_fake_run(elsewhere, run)
    folder = root / run.run_dir
    folder.parent.mkdir(parents=True)
    if plant == "loop":
        folder.symlink_to(folder)
    else:
        folder.symlink_to(elsewhere / run.run_dir)
        (root / "stray").symlink_to(elsewhere / run.run_dir)
    with deadline(10):
        findings = verify_folders(root, [run])
    assert findings[0].state == DAMAGED and "a link out of the records folder" in \
        findings[0].detail, findings
    assert findings[1:] == []


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=8), st.text(max_size=12), max_size=4))
def test_an_archives_config_prints_inert_whatever_its_strings(strings):
    """`initmem archive config A` with no --out prints a stranger's config on the screen:
    YAML's emitter escapes every control and bidi character ("\\e", "\\u202E")."""
    crafted = {"notes": strings, "families": {"\x1b]52;c;aGk=\x07": {"b": "\u202e\r"}}}
    with (patch.object(archive, "read_manifest", return_value={"config": crafted}),
          redirect_stdout(io.StringIO()) as out):
        assert cli.main(["archive", "config", "crafted.tar"]) == 0
    assert all(line.isprintable() for line in out.getvalue().splitlines()), out.getvalue()


def test_a_looks_decisions_that_are_a_fifo_stop_status_at_once(tmp_path):
    """A staged study's look<j>.csv planted as a FIFO in a shared results folder: `initmem
    status` (and the looks that read it) refuse it in one line instead of blocking."""
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "looks").mkdir()
    os.mkfifo(tmp_path / "looks" / "look1.csv")
    (tmp_path / "looks" / "lookx.csv").write_text("not a look")  # passed over, not a crash
    with deadline(10), pytest.raises(InputError, match="look1.csv: a FIFO, not a regular"):
        status.sweep_status(root / "config" / "gpu_first.yaml", tmp_path / "runs", None,
                            root / "paper" / "published", root / "paper" / "claims.yaml")
