"""Directory expansion on real trees in tmp_path: skip rules, .gitignore, globs, symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ktui.core.config import IngestSettings
from ktui.core.errors import IngestError
from ktui.core.ingest import DirectoryListing, expand_directory

SETTINGS = IngestSettings()


def touch(root: Path, *rels: str, text: str = "# hello\n") -> None:
    for rel in rels:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def rel_files(listing: DirectoryListing, root: Path) -> list[str]:
    return sorted(os.path.relpath(p, root) for p in listing.iter_files())


async def test_tree_shape_sorted_absolute_and_empty_folders_dropped(tmp_path: Path) -> None:
    touch(tmp_path, "b.md", "a.txt", "docs/guide.md", "docs/api/ref.md", "docs/img/logo.svg", "empty/.keep",
          "only-binaries/x.bin")
    (tmp_path / "truly-empty").mkdir()
    listing = await expand_directory(str(tmp_path), SETTINGS)
    assert listing.path == str(tmp_path)
    assert listing.files == [str(tmp_path / "a.txt"), str(tmp_path / "b.md")]
    assert [os.path.basename(d.path) for d in listing.subdirs] == ["docs"]
    docs = listing.subdirs[0]
    assert docs.files == [str(tmp_path / "docs" / "guide.md")]
    assert [d.path for d in docs.subdirs] == [str(tmp_path / "docs" / "api")]
    assert listing.file_count == 4
    assert all(os.path.isabs(p) for p in listing.iter_files())


async def test_default_skips(tmp_path: Path) -> None:
    touch(tmp_path, "keep.md", ".hidden.md", ".git/config.md", ".venv/lib/x.py", "node_modules/pkg/readme.md",
          "__pycache__/m.py", "build/out.html", "dist/x.js", "target/t.rs", "src/main.py",
          "myenv/pyvenv.cfg", "myenv/lib/site.py", "conda/conda-meta/history.txt", "conda/pkg.py",
          "src/.cache/c.md")
    listing = await expand_directory(str(tmp_path), SETTINGS)
    assert rel_files(listing, tmp_path) == ["keep.md", "src/main.py"]


async def test_the_walk_reports_what_it_skipped_and_why(tmp_path: Path) -> None:
    touch(tmp_path, "keep.md", "setup.exe", "logo.psd", "a.bin", "b.bin", ".hidden.md", "node_modules/pkg/readme.md",
          "drafts/out.md", "debug.log.txt", "photo.png")
    (tmp_path / ".gitignore").write_text("drafts/\n*.log.txt\n")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.md")
    listing = await expand_directory(str(tmp_path), SETTINGS, images=False)
    assert rel_files(listing, tmp_path) == ["keep.md"]
    skipped = listing.skipped
    assert skipped is not None
    counts = skipped.counts
    assert counts["unsupported type"] == 4 and skipped.examples["unsupported type"] == ["a.bin", "b.bin", "logo.psd"]
    assert counts["ignore rule"] == 2 and set(skipped.examples["ignore rule"]) == {"drafts/", "debug.log.txt"}
    assert counts["hidden"] == 1 and counts["skipped folder"] == 1 and counts["image (OCR off)"] == 1
    assert counts.get("not a regular file", 0) == (1 if hasattr(os, "mkfifo") else 0)
    assert skipped.as_dict()["total"] == skipped.total == sum(counts.values())
    # nothing indexable: the error says what was left out
    empty = tmp_path / "empty"
    touch(empty, "a.exe", "b.exe")
    with pytest.raises(IngestError, match=r"no indexable files \(skipped: 2 unsupported type\)"):
        await expand_directory(str(empty), SETTINGS)


async def test_empty_and_whitespace_only_files_are_skipped_not_listed(tmp_path: Path) -> None:
    from ktui.core.ingest.expand import BLANK_PROBE_BYTES, BLANK_SCAN_BYTES

    touch(tmp_path, "pkg/mod.py", text="def f():\n    return 1\n")
    touch(tmp_path, "pkg/__init__.py", "notes/blank.md", text="")
    touch(tmp_path, "notes/spaces.txt", text=" \n\t\r\n\n")
    (tmp_path / "notes" / "bom.md").write_bytes(b"\xef\xbb\xbf\n")
    touch(tmp_path, "notes/x.md", text="x")  # one character is content
    touch(tmp_path, "notes/wide.txt", text=" \n\t" * 100)  # whitespace past the head probe: empty too
    touch(tmp_path, "notes/late.md", text=" " * (BLANK_PROBE_BYTES * 3) + "text after blanks")  # content
    touch(tmp_path, "notes/huge.txt", text=" " * (BLANK_SCAN_BYTES + 1))  # past the scan: listed, fails alone
    (tmp_path / "pkg" / "link.py").symlink_to(tmp_path / "pkg" / "__init__.py")  # followed: empty too
    listing = await expand_directory(str(tmp_path), SETTINGS)
    assert rel_files(listing, tmp_path) == ["notes/huge.txt", "notes/late.md", "notes/x.md", "pkg/mod.py"]
    assert listing.skipped is not None and listing.skipped.counts == {"empty file": 6}
    assert listing.skipped.examples["empty file"] == ["notes/blank.md", "notes/bom.md", "notes/spaces.txt"]
    only_empty = tmp_path / "placeholders"
    touch(only_empty, "a.md", "b/__init__.py", text="")
    with pytest.raises(IngestError, match=r"^Directory contains no indexable files \(skipped: 2 empty file\)$"):
        await expand_directory(str(only_empty), SETTINGS)


async def test_gitignore_semantics_nested_and_negated(tmp_path: Path) -> None:
    touch(tmp_path, "a.md", "a.log.txt", "notes/secret.md", "notes/public.md", "drafts/x.md",
          "sub/b.md", "sub/generated.md", "sub/deep/keep.txt", "sub/deep/tmp.txt", "sub/deep/important.tmp.txt")
    (tmp_path / ".gitignore").write_text("# comment\n*.log.txt\ndrafts/\nnotes/*\n!notes/public.md\n*tmp.txt\n")
    (tmp_path / "sub" / ".gitignore").write_text("generated.md\n!important.tmp.txt\n")
    listing = await expand_directory(str(tmp_path), SETTINGS)
    assert rel_files(listing, tmp_path) == [
        "a.md", "notes/public.md", "sub/b.md", "sub/deep/important.tmp.txt", "sub/deep/keep.txt",
    ]


async def test_include_and_exclude_globs(tmp_path: Path) -> None:
    touch(tmp_path, "a.md", "b.txt", "c.py", "docs/d.md", "docs/private/e.md", "old/f.md")
    st = IngestSettings(include=("*.md", "*.txt"), exclude=("old/", "docs/private/**"))
    listing = await expand_directory(str(tmp_path), st)
    assert rel_files(listing, tmp_path) == ["a.md", "b.txt", "docs/d.md"]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
async def test_symlink_loops_end_and_linked_trees_are_listed_once(tmp_path: Path) -> None:
    touch(tmp_path, "real/doc.md", "other/x.md")
    os.symlink(tmp_path / "real", tmp_path / "real" / "loop")  # real/loop -> real
    os.symlink(tmp_path, tmp_path / "other" / "up")  # other/up -> root
    os.symlink(tmp_path / "nowhere", tmp_path / "broken.md")  # dangling
    os.symlink(tmp_path / "other" / "x.md", tmp_path / "alias.md")  # a file link is a file
    listing = await expand_directory(str(tmp_path), SETTINGS)
    files = rel_files(listing, tmp_path)
    assert files == ["alias.md", "other/x.md", "real/doc.md"]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
async def test_self_and_two_link_symlink_loops_are_reported_as_symlink_loops(tmp_path: Path) -> None:
    from ktui.tui.skip_summary import skipped_summary

    touch(tmp_path, "loop/doc.md")
    os.symlink("self", tmp_path / "loop" / "self")  # loop/self -> itself (ELOOP)
    os.symlink("b", tmp_path / "loop" / "a")  # loop/a -> loop/b -> loop/a
    os.symlink("a", tmp_path / "loop" / "b")
    listing = await expand_directory(str(tmp_path), SETTINGS)
    assert rel_files(listing, tmp_path) == ["loop/doc.md"]
    skipped = listing.skipped
    assert skipped.counts == {"symlink loop": 3}, skipped.counts
    assert skipped.examples["symlink loop"] == ["loop/a", "loop/b", "loop/self"]
    assert skipped_summary(skipped.as_dict()) == "3 symlink loop (loop/a, loop/b, loop/self)"


async def test_errors(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match=r"Directory not found: .*missing"):
        await expand_directory(str(tmp_path / "missing"), SETTINGS)
    touch(tmp_path, "file.md")
    with pytest.raises(IngestError, match=r"Not a directory: .*file\.md"):
        await expand_directory(str(tmp_path / "file.md"), SETTINGS)
    nothing = tmp_path / "nothing"
    touch(nothing, "a.svg", "node_modules/x.md", ".hidden/y.md")
    with pytest.raises(IngestError, match=r"^Directory contains no indexable files "
                       r"\(skipped: 1 hidden, 1 skipped folder, 1 unsupported type\)$"):
        await expand_directory(str(nothing), SETTINGS)
    pictures = tmp_path / "pictures"
    touch(pictures, "scan.png", "photo.JPG", "fax.tiff")
    assert (await expand_directory(str(pictures), SETTINGS)).file_count == 3  # images are read by OCR
    with pytest.raises(IngestError, match=r"^Directory contains no indexable files \(skipped: 3 image \(OCR off\)\)$"):
        await expand_directory(str(pictures), SETTINGS, images=False)  # a base with OCR off
    empty = tmp_path / "void"
    empty.mkdir()
    with pytest.raises(IngestError, match=r"^Directory contains no indexable files$"):
        await expand_directory(str(empty), SETTINGS)


async def test_root_named_like_a_skipped_folder_is_still_walked(tmp_path: Path) -> None:
    root = tmp_path / "build"
    touch(root, "notes.md")
    listing = await expand_directory(str(root), SETTINGS)
    assert listing.files == [str(root / "notes.md")]
