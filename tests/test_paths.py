"""The output folder a command writes in: :func:`bemore.paths.output_folder` makes it and shows it
writable, :func:`bemore.paths.check_output_folder` shows it writable before the work and leaves
the file system as it found it (both defined by the bench side, ``controller.outputs``)."""

from __future__ import annotations

import builtins
import os
import re
from pathlib import Path

import pytest

import controller.outputs
from bemore.errors import DataError
from bemore.paths import WRITE_PROBE_PREFIX, check_output_folder, output_folder
from tests.filesystem import immutable


def _tree(folder: Path) -> list[str]:
    """Every path under ``folder`` (links not followed), relative, sorted."""
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def _at(folder: Path) -> str:
    """A pattern matching the start of a line that names ``folder``."""
    return "^" + re.escape(str(folder))


def test_the_check_leaves_no_folder_behind_and_output_folder_makes_it(tmp_path) -> None:
    out = tmp_path / "new" / "deeper" / "out"
    check_output_folder(out, ["athlete.json"], ["plots"])
    assert _tree(tmp_path) == []
    assert output_folder(out) == out and out.is_dir()


def test_the_check_removes_only_the_empty_folders_it_made(tmp_path, monkeypatch) -> None:
    # Something writes in the new folder while it is checked (another run): that folder, and
    # so its new parent, stay; the folder that was there (tmp_path) is never removed.
    probe = controller.outputs._write_probe

    def probe_and_another_writer(folder: Path) -> None:
        (folder / "theirs.txt").write_text("not the check's")
        probe(folder)

    monkeypatch.setattr(controller.outputs, "_write_probe", probe_and_another_writer)
    check_output_folder(tmp_path / "new" / "out")
    assert _tree(tmp_path) == ["new", "new/out", "new/out/theirs.txt"]
    check_output_folder(tmp_path)
    assert tmp_path.is_dir()


def test_a_refused_check_leaves_no_folder_behind(tmp_path, monkeypatch,
                                                  unwritable_folder) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(DataError, match=_at(tmp_path) + "/a-file/out: cannot create "
                                        r"the output folder \(Not a directory\)$"):
        check_output_folder(tmp_path / "a-file" / "out")
    with pytest.raises(DataError, match="^" + re.escape(f"{unwritable_folder}: cannot write in "
                                                         "the output folder")):
        check_output_folder(unwritable_folder)

    # A folder the system lets be made and then refuses a file in (a read-only bind mount
    # below, say): refused, and the folders made for the check removed.
    def read_only(folder: Path) -> None:
        raise DataError(f"{folder}: cannot write in the output folder (Read-only file system)")

    monkeypatch.setattr(controller.outputs, "_write_probe", read_only)
    with pytest.raises(DataError, match="Read-only file system"):
        check_output_folder(tmp_path / "new" / "out")
    assert _tree(tmp_path) == ["a-file", unwritable_folder.name]  # what was there, no more


@pytest.mark.parametrize("made", [False, True])
def test_ctrl_c_during_the_probe_leaves_no_probe_file(tmp_path, monkeypatch, made: bool) -> None:
    # Ctrl-C between the probe's creation and its removal (here: as its handle is closed):
    # the probe is removed all the same, the interruption goes on; a folder the check made is
    # removed too.
    real_close = os.close

    def close_then_ctrl_c(handle: int) -> None:
        real_close(handle)
        raise KeyboardInterrupt

    monkeypatch.setattr(controller.outputs.os, "close", close_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        if made:
            check_output_folder(tmp_path / "new")
        else:
            output_folder(tmp_path)
    monkeypatch.undo()
    assert list(tmp_path.glob(f"{WRITE_PROBE_PREFIX}*")) == []
    assert _tree(tmp_path) == []


def test_a_broken_link_to_a_missing_folder_is_refused_and_nothing_made(tmp_path) -> None:
    # athlete.json -> a file in a folder that does not exist: path.exists() is False, yet no
    # file can be written through it; nor through a link into a folder not made yet (which the check
    # does not make). A link into a folder that is there is written through: the check
    # creates nothing at its target.
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "there").mkdir()
    for target in (tmp_path / "nowhere" / "nothing" / "athlete.json",
                   tmp_path / "elsewhere" / "athlete.json"):
        (out / "athlete.json").unlink(missing_ok=True)
        (out / "athlete.json").symlink_to(target)
        with pytest.raises(DataError) as error:
            check_output_folder(out, ["athlete.json"])
        assert str(error.value) == (f"{out}/athlete.json: cannot write the output file (a link "
                                    f"to {target}, whose folder does not exist)")
    (out / "athlete.json").unlink()
    (out / "athlete.json").symlink_to(tmp_path / "there" / "athlete.json")
    check_output_folder(out, ["athlete.json"])
    output_folder(out, ["athlete.json"])
    assert _tree(tmp_path) == ["out", "out/athlete.json", "there"]


@pytest.fixture
def read_only_file(tmp_path, monkeypatch):
    """A file that opens for reading and is refused for writing, even to root: made immutable
    (``chattr +i``: root on ext4 and the like), else read-only by its permission bits (not
    root), else, where neither refuses root, ``open`` in controller.outputs refusing its writing
    modes. Checked before it is handed over: it reads, and does not open for writing."""
    path = tmp_path / "out" / "athlete.json"
    path.parent.mkdir()
    path.write_text("{}")
    with immutable(path) as refused_by_chattr:
        if not refused_by_chattr and os.geteuid() != 0:
            path.chmod(0o444)
        elif not refused_by_chattr:
            real_open = builtins.open

            def refusing_open(file, mode="r", *args, **kwargs):
                if Path(file) == path and set(mode) & set("wa+x"):
                    raise PermissionError(13, "Permission denied", str(file))
                return real_open(file, mode, *args, **kwargs)

            monkeypatch.setattr(controller.outputs, "open", refusing_open, raising=False)
        opener = getattr(controller.outputs, "open", open)
        with opener(path, "rb") as readable:
            assert readable.read() == b"{}"
        with pytest.raises(PermissionError):
            opener(path, "r+b").close()
        yield path


def test_an_existing_output_file_that_will_not_open_for_writing_is_refused(
        read_only_file) -> None:
    out = read_only_file.parent
    with pytest.raises(DataError, match=_at(out) + "/athlete.json: cannot write the output "
                                        r"file \((Operation not permitted|Permission denied)\)$"):
        check_output_folder(out, ["convergence.csv", "athlete.json"])
    assert read_only_file.read_text() == "{}"


def test_a_sub_folder_in_the_place_of_a_file_or_a_file_in_the_place_of_one_is_refused(
        tmp_path) -> None:
    (tmp_path / "plots").write_text("not a folder")
    (tmp_path / "gesture.gif").mkdir()
    with pytest.raises(DataError, match=_at(tmp_path) + "/plots: output folder exists and is "):
        check_output_folder(tmp_path, folders=["plots"])
    with pytest.raises(DataError, match=_at(tmp_path) + "/gesture.gif: cannot write the output "
                                        r"file \(Is a directory\)$"):
        check_output_folder(tmp_path, ["gesture.gif"])
    (tmp_path / "plots").unlink()
    (tmp_path / "plots").mkdir()
    check_output_folder(tmp_path, folders=["plots"])
    assert _tree(tmp_path) == ["gesture.gif", "plots"]
