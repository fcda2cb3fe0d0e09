#!/usr/bin/env python3
"""intake.py — pristine intake of a student submission (docs/grading.md, "The trust boundary").

    python3 -m grader.pipeline.intake SUBMISSION [--rubric grader/rubric.toml] [--json]

The command above is a dry run: it lists what grading SUBMISSION would take, ignore and refuse,
and writes nothing. grade.py --submission does the real thing in two steps:

  make_pristine_tree(instructor_root, dest)   a clean copy of the instructor's tree: the files
                                              git tracks (or, in an unpacked handout, every
                                              file but build output), nothing else;
  intake(submission, tree, policy)            copies into that tree only the regular files whose
                                              path matches a student-owned glob of the rubric's
                                              [submission] table, replacing the pristine file.

So a submission's own harness, rubric, scripts or CMake edits never take part in its grade.
A submission is a directory, a .zip or a .tar (.tar.gz/.tgz/.tar.bz2/.tar.xz), in one of three
shapes: a whole handout tree (its student/ folder found at any depth, e.g. inside one wrapping
folder), a bare student/ folder, or flat files (linear.cu at the top means student/linear.cu).
The folder is the graded track's: student/triton/ for the Triton track (rmsnorm.py at the top
means student/triton/rmsnorm.py).
Archives are read in memory, member by member, with bounded reads: nothing is extracted, members
that are not student-owned are never decompressed (zip) or only streamed through (tar), and the
policy's size and count limits stop archive bombs. Links, devices, paths that escape, oversized
and binary files are refused, each with a one-line reason.
"""

import argparse
import bz2
import contextlib
import gzip
import hashlib
import io
import json
import lzma
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tomllib
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from grader import ROOT

# Every key of the rubric's [submission] table, with its type; all are required (the rubric is
# the one place their values live). `owned` maps each student track (grade.py --track) to its
# globs; a policy (what intake() takes) holds the graded track's list.
POLICY_KEYS = {
    "owned": dict,
    "max_file_bytes": int,
    "max_total_bytes": int,
    "max_files": int,
    "max_entries": int,
    "max_archive_bytes": int,
}


# What a damaged archive or compressed stream raises while it is read (gzip's and bz2's errors are
# OSErrors).
READ_ERRORS = (
    zipfile.BadZipFile,
    tarfile.TarError,
    zlib.error,
    lzma.LZMAError,
    EOFError,
    OSError,
    NotImplementedError,
    ValueError,
)


class IntakeError(Exception):
    """A submission (or tree) that cannot be graded at all; the message is one line."""


def policy_from(table, track="student"):
    """The rubric's [submission] table, checked (every key present with the right type), as the
    policy of one student track: its `owned` globs."""
    for key, kind in POLICY_KEYS.items():
        if key not in table:
            raise IntakeError(f"rubric [submission] lacks '{key}'")
        if not isinstance(table[key], kind) or isinstance(table[key], bool):
            raise IntakeError(f"rubric [submission] '{key}' must be a {kind.__name__}")
    unknown = sorted(set(table) - set(POLICY_KEYS))
    if unknown:
        raise IntakeError(f"rubric [submission] has unknown keys: {', '.join(unknown)}")
    if track not in table["owned"]:
        raise IntakeError(f"rubric [submission.owned] has no globs for the track '{track}'")
    return checked(dict(table, owned=table["owned"][track]))


def checked(policy):
    """A policy whose `owned` globs are usable: a list of 'folder/pattern' globs of one folder."""
    owned = policy["owned"]
    if (
        not isinstance(owned, list)
        or not owned
        or not all(isinstance(g, str) and "/" in g for g in owned)
    ):
        raise IntakeError("rubric [submission.owned] must list globs like 'student/*.cu'")
    if len({os.path.dirname(g) for g in owned}) != 1:
        raise IntakeError(
            "rubric [submission.owned] globs of a track must share one folder "
            "(student/, student/triton/)"
        )
    return policy


# ----------------------------------------------------------------------------- pristine tree


def _git_mode(mode):
    """Files as a git checkout makes them (0644, or 0755 when executable), so any user can read
    them: the sandboxed student process runs as an unprivileged user."""
    return 0o755 if mode & 0o111 else 0o644


def _tracked_files(root):
    """Paths git tracks in root (a checkout's top), or None when root is not a checkout.
    safe.directory: the grader (root, say) may read an instructor's checkout it does not own."""
    if not os.path.exists(os.path.join(root, ".git")):
        return None
    try:
        out = subprocess.run(
            ["git", "-c", f"safe.directory={root}", "-C", root, "ls-files", "-z"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        detail = (getattr(e, "stderr", b"") or str(e).encode()).decode(errors="replace")
        raise IntakeError(
            f"git ls-files failed in {root}: {detail.strip().splitlines()[0]}"
        ) from None
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


def _walked_files(root):
    """Every file under root but those its .gitignore names. Only the plain patterns this
    project's .gitignore uses are understood: '/dir*/' (at the top), 'dir/' (anywhere), '*.ext'."""
    top, anywhere, names = [], [".git"], []
    try:
        with open(os.path.join(root, ".gitignore"), encoding="utf-8") as f:
            lines = [line.strip() for line in f]
    except FileNotFoundError:
        lines = []
    for line in lines:
        if line and not line.startswith(("#", "!")):
            if line.endswith("/"):
                (top if line.startswith("/") else anywhere).append(line.strip("/"))
            else:
                names.append(line.lstrip("/"))

    def ignored(name, patterns):
        return any(fnmatchcase(name, p) for p in patterns)

    files = []
    for here, dirs, entries in os.walk(root):
        rel = os.path.relpath(here, root)
        dirs[:] = sorted(d for d in dirs if not ignored(d, anywhere + (top if rel == "." else [])))
        files += [
            os.path.normpath(os.path.join(rel, n)) for n in sorted(entries) if not ignored(n, names)
        ]
    return files


def make_pristine_tree(instructor_root, dest):
    """Copy the instructor's tree into dest (new or empty): a git checkout's tracked files, else
    (an unpacked tree) every file its .gitignore does not name. Directories get 0755, files
    0644/0755 (see _git_mode). Returns the number of files copied."""
    root = os.path.abspath(instructor_root)
    if not os.path.isdir(root):
        raise IntakeError(f"{instructor_root}: not a directory")
    files = _tracked_files(root)
    if files is None:
        files = _walked_files(root)
    os.makedirs(dest, exist_ok=True)
    if os.listdir(dest):
        raise IntakeError(f"{dest}: the pristine tree must go into a new or empty directory")
    os.chmod(dest, 0o755)
    copied = 0
    for rel in files:
        src, dst = os.path.join(root, rel), os.path.join(dest, rel)
        if not os.path.lexists(src):  # tracked, but deleted in this checkout
            continue
        parent = os.path.dirname(dst)
        if not os.path.isdir(parent):
            os.makedirs(parent)
            for d in _new_dirs(dest, parent):
                os.chmod(d, 0o755)
        if os.path.isdir(src) and not os.path.islink(src):  # a submodule: its files as they are
            shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        else:
            shutil.copy2(src, dst, follow_symlinks=False)
            if not os.path.islink(dst):
                os.chmod(dst, _git_mode(os.stat(dst).st_mode))
        copied += 1
    return copied


def _new_dirs(top, leaf):
    """Directories from top (exclusive) down to leaf (inclusive)."""
    rel = os.path.relpath(leaf, top).split(os.sep)
    return [os.path.join(top, *rel[:i]) for i in range(1, len(rel) + 1)]


# ----------------------------------------------------------------------------- submissions


@dataclass
class Member:
    """One entry of a submission, whatever its container."""

    name: str  # as in the submission, '/'-separated
    kind: str  # "file", "dir", "symlink", "hardlink" or "special"
    size: int = 0  # declared size (files)
    read: Callable[[int], bytes] | None = None  # read(limit): at most limit bytes (files)
    detail: str = ""  # link target, or what kind of special file


def _count(members, policy, what):
    """Pass members through, stopping at max_entries (every entry counts, ignored ones too)."""
    for n, member in enumerate(members, 1):
        if n > policy["max_entries"]:
            raise IntakeError(
                f"{what}: more than max_entries ({policy['max_entries']}) entries "
                "(a whole checkout with its build folder? submit student/ only)"
            )
        yield member


def _directory_members(top):
    def read_file(path, st):
        def read(limit):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
                with os.fdopen(fd, "rb") as f:
                    now = os.fstat(f.fileno())
                    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                        raise IntakeError(f"{path}: changed while the submission was read")
                    return f.read(limit)
            except OSError as e:
                raise IntakeError(f"{path}: {e.strerror}") from None

        return read

    def walk(here, prefix):
        with os.scandir(here) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            name = prefix + e.name
            st = e.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                yield Member(name, "symlink", detail=os.readlink(e.path))
            elif stat.S_ISDIR(st.st_mode):
                yield Member(name, "dir")
                yield from walk(e.path, name + "/")
            elif not stat.S_ISREG(st.st_mode):
                yield Member(name, "special", detail=_special_kind(st.st_mode))
            elif st.st_nlink > 1:
                yield Member(name, "hardlink", detail=f"{st.st_nlink} names for one file")
            else:
                yield Member(name, "file", st.st_size, read_file(e.path, st))

    return walk(top, "")


def _special_kind(mode):
    for test, word in (
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return word
    return "special file"


def _zip_members(archive, what):
    def read_member(info):
        def read(limit):
            if info.flag_bits & 0x1:
                raise IntakeError(f"{what}: '{info.filename}' is encrypted")
            try:
                with archive.open(info) as f:
                    return f.read(limit)
            except READ_ERRORS as e:
                raise IntakeError(f"{what}: corrupt member '{info.filename}': {e}") from None

        return read

    for info in archive.infolist():
        mode = info.external_attr >> 16 if info.create_system == 3 else 0  # 3: Unix
        if stat.S_ISLNK(mode):
            yield Member(info.filename, "symlink")
        elif info.is_dir():
            yield Member(info.filename, "dir")
        elif stat.S_IFMT(mode) not in (0, stat.S_IFREG):  # 0: no file type recorded
            yield Member(info.filename, "special", detail=_special_kind(mode))
        else:
            yield Member(info.filename, "file", info.file_size, read_member(info))


class _Capped(io.RawIOBase):
    """A decompressed stream that refuses to go past `cap` bytes: the tar reader never expands
    more than max_archive_bytes, whatever the headers claim."""

    def __init__(self, stream, cap, what):
        self._stream, self._cap, self._what = stream, cap, what

    def _check(self, position):
        if position > self._cap:
            raise IntakeError(
                f"{self._what}: expands past max_archive_bytes ({self._cap} bytes; "
                "an archive bomb, or a whole checkout? submit student/ only)"
            )

    def readable(self):
        return True

    def seekable(self):
        return True

    def read(self, n=-1):
        n = self._cap + 1 - self._stream.tell() if n is None or n < 0 else n
        data = self._stream.read(n)
        self._check(self._stream.tell())
        return data

    def seek(self, offset, whence=io.SEEK_SET):
        if whence == io.SEEK_END:
            raise io.UnsupportedOperation("seek from the end of a compressed stream")
        target = offset + (self._stream.tell() if whence == io.SEEK_CUR else 0)
        self._check(target)
        return self._stream.seek(target)

    def tell(self):
        return self._stream.tell()


def _tar_members(archive, what):
    def read_member(info):
        def read(limit):
            try:
                return archive.extractfile(info).read(limit)
            except READ_ERRORS as e:
                raise IntakeError(f"{what}: corrupt member '{info.name}': {e}") from None

        return read

    for info in archive:
        if info.isreg():
            yield Member(info.name, "file", info.size, read_member(info))
        elif info.isdir():
            yield Member(info.name, "dir")
        elif info.issym():
            yield Member(info.name, "symlink", detail=info.linkname)
        elif info.islnk():
            yield Member(info.name, "hardlink", detail=info.linkname)
        else:
            yield Member(info.name, "special", detail="device, fifo or other special entry")


def _open_tar(path, cap, stack):
    """A (compressed) tar read through _Capped, its compression told by its magic bytes; both
    are closed with `stack`."""
    with open(path, "rb") as f:
        magic = f.read(6)
    opener = (
        gzip.open
        if magic[:2] == b"\x1f\x8b"
        else bz2.open
        if magic[:3] == b"BZh"
        else lzma.open
        if magic == b"\xfd7zXZ\x00"
        else open
    )
    stream = stack.enter_context(opener(path, "rb"))
    return stack.enter_context(tarfile.open(fileobj=_Capped(stream, cap, path), mode="r:"))


@contextlib.contextmanager
def _opened(submission, policy):
    """The submission's members, as a list (its layout is judged on all the names); their
    read() works while the context lasts."""
    if not os.path.exists(submission):
        raise IntakeError(f"{submission}: no such file or directory")
    with contextlib.ExitStack() as stack:
        try:
            if os.path.isdir(submission):
                members = _directory_members(submission)
            else:
                with open(submission, "rb") as f:
                    is_zip = f.read(2) == b"PK"
                if is_zip:
                    archive = stack.enter_context(zipfile.ZipFile(submission))
                    members = _zip_members(archive, submission)
                else:
                    archive = _open_tar(submission, policy["max_archive_bytes"], stack)
                    members = _tar_members(archive, submission)
            members = list(_count(members, policy, submission))
        except READ_ERRORS as e:
            raise IntakeError(
                f"{submission}: cannot be read as a directory, .zip or .tar[.gz] ({e})"
            ) from None
        yield members


# ----------------------------------------------------------------------------- paths


def _unsafe(name):
    """Why a member's name may not be used (None when it is safe)."""
    if any(ord(c) < 32 or c == "\x7f" for c in name):
        return "control characters in the name"
    if name.startswith(("/", "\\")) or (name[:1].isalpha() and name[1:2] == ":"):
        return "absolute path"
    if ".." in name.replace("\\", "/").split("/"):
        return "path escapes the submission (..)"
    return None


def _parts(name):
    return tuple(p for p in name.replace("\\", "/").split("/") if p not in ("", "."))


def _owned(parts, globs):
    """A glob matches folder by folder: 'student/*.cu' takes student/x.cu, not student/a/x.cu."""
    return any(
        len(g.split("/")) == len(parts)
        and all(fnmatchcase(p, q) for p, q in zip(parts, g.split("/")))
        for g in globs
    )


def _layout(files, folder):
    """How the submission's files map into the tree: returns (strip, flat, description).

    A file's tree path is its parts after the first `strip` ones, with `folder` (a tuple of
    parts: student/, or student/triton/) put in front when flat. The shallowest `folder` is the
    tree's; without one, the files are flat, inside any folders that wrap all of them."""
    name = "/".join(folder)
    bases = sorted(
        {
            p[:i]
            for p in files
            for i in range(len(p) - len(folder))
            if p[i : i + len(folder)] == folder
        },
        key=len,
    )
    if bases:
        shallowest = ["/".join(b + folder) for b in bases if len(b) == len(bases[0])]
        if len(shallowest) > 1:
            raise IntakeError(
                f"the submission has several {name}/ folders: "
                f"{', '.join(shallowest[:3])} (submit one)"
            )
        return bases[0], False, f"{name}/ folder at '{shallowest[0]}/'"
    depth = 0
    while files and all(len(p) > depth + 1 and p[depth] == files[0][depth] for p in files):
        depth += 1
    wrapper = "/".join(files[0][:depth]) + "/" if depth else ""
    return (
        files[0][:depth] if files else (),
        True,
        f"flat files{' in ' + repr(wrapper) if wrapper else ''}, taken as {name}/",
    )


# ----------------------------------------------------------------------------- intake


def intake(submission, tree, policy):
    """Copy the student-owned files of `submission` into `tree` (None: a dry run, nothing is
    written). Returns a JSON-serialisable record:
      {"submission", "layout", "accepted": [{path, source, bytes, sha256}],
       "ignored": [{path, reason}], "refused": [{path, reason}]}
    Raises IntakeError (one line) for a missing path or an unreadable, corrupt or bomb archive."""
    policy = checked(policy)
    folder = tuple(os.path.dirname(policy["owned"][0]).split("/"))
    with _opened(os.fspath(submission), policy) as members:
        return _take(members, tree, policy, folder, os.fspath(submission))


def _take(members, tree, policy, folder, submission):
    record = {"submission": submission, "layout": "", "accepted": [], "ignored": [], "refused": []}

    def refuse(name, reason):
        record["refused"].append({"path": _printable(name), "reason": reason})

    files = []
    for m in members:
        reason = _unsafe(m.name)
        if reason:
            refuse(m.name, reason)
        elif m.kind == "symlink":
            refuse(m.name, "symbolic link" + (f" to {_printable(m.detail)}" if m.detail else ""))
        elif m.kind == "hardlink":
            refuse(m.name, f"hard link ({_printable(m.detail)})")
        elif m.kind == "special":
            refuse(m.name, f"not a regular file ({m.detail})")
        elif m.kind == "file" and _parts(m.name):
            files.append(m)
    strip, flat, record["layout"] = _layout([_parts(m.name) for m in files], folder)

    total, taken = 0, set()
    limit = policy["max_file_bytes"]
    for m in files:
        parts = _parts(m.name)
        path = parts[len(strip) :] if parts[: len(strip)] == strip else None
        if path is not None and flat:
            path = folder + path
        if path is None or not _owned(path, policy["owned"]):
            record["ignored"].append({"path": m.name, "reason": "not student-owned"})
            continue
        rel = "/".join(path)
        if rel in taken:
            refuse(m.name, f"a second entry for {rel} (the first one is used)")
            continue
        if len(record["accepted"]) >= policy["max_files"]:
            refuse(m.name, f"more than max_files ({policy['max_files']}) student files")
            continue
        data = m.read(limit + 1) if m.size <= limit else None  # never more than limit + 1
        if data is None or len(data) > limit:
            refuse(m.name, f"larger than max_file_bytes ({limit} bytes)")
            continue
        if total + len(data) > policy["max_total_bytes"]:
            refuse(m.name, f"past max_total_bytes ({policy['max_total_bytes']} bytes in all)")
            continue
        reason = _not_text(data)
        if reason:
            refuse(m.name, reason)
            continue
        taken.add(rel)
        total += len(data)
        if tree is not None:
            _write(tree, path, data)
        record["accepted"].append(
            {
                "path": rel,
                "source": m.name,
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
    return record


def _not_text(data):
    """Why data is not source text (None when it is): a NUL byte, or not UTF-8."""
    nul = data.find(b"\0")
    if nul >= 0:
        return f"binary file (NUL byte at offset {nul})"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})"
    return None


def _printable(name):
    return "".join(c if c.isprintable() else "?" for c in name)


def _write(tree, path, data):
    """Write data at tree/path, never through a link, as a 0644 file readable by any user."""
    root = os.path.realpath(tree)
    parent = os.path.join(root, *path[:-1])
    os.makedirs(parent, exist_ok=True)
    if os.path.commonpath([os.path.realpath(parent), root]) != root:
        raise IntakeError(f"{tree}: {'/'.join(path[:-1])} leads out of the tree")
    target = os.path.join(parent, path[-1])
    if os.path.islink(target):
        os.unlink(target)
    try:
        fd = os.open(
            target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
        )
    except OSError as e:
        raise IntakeError(f"cannot write {'/'.join(path)} into the tree: {e.strerror}") from None
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), 0o644)
        f.write(data)


# ----------------------------------------------------------------------------- command line


def summary(record):
    """One line for a terminal or a report."""
    return (
        f"intake of {record['submission']} ({record['layout']}): "
        f"{len(record['accepted'])} accepted, {len(record['ignored'])} ignored, "
        f"{len(record['refused'])} refused"
    )


def main():
    parser = argparse.ArgumentParser(
        description="what grading a submission would take from it (a dry run: nothing is written)"
    )
    parser.add_argument("submission", help="a directory, .zip or .tar[.gz]")
    parser.add_argument("--rubric", default=os.path.join(ROOT, "grader", "rubric.toml"))
    parser.add_argument(
        "--track", default="student", help="the student track graded (student, triton)"
    )
    parser.add_argument("--json", action="store_true", help="print the full record as JSON")
    args = parser.parse_args()
    try:
        with open(args.rubric, "rb") as f:
            policy = policy_from(tomllib.load(f).get("submission", {}), args.track)
        record = intake(args.submission, None, policy)
    except (IntakeError, OSError, tomllib.TOMLDecodeError) as e:
        print(f"intake: {e}", file=sys.stderr)
        sys.exit(2)
    if args.json:
        print(json.dumps(record, indent=1))
        return
    print(summary(record))
    for entry in record["accepted"]:
        print(f"  accepted  {entry['path']}  ({entry['bytes']} bytes, from {entry['source']})")
    for entry in record["refused"]:
        print(f"  REFUSED   {entry['path']}: {entry['reason']}")
    for entry in record["ignored"]:
        print(f"  ignored   {entry['path']}: {entry['reason']}")


if __name__ == "__main__":
    main()
