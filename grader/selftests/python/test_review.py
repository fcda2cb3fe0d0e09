#!/usr/bin/env python3
"""Tests of grader/pipeline/review.py: every category of CATEGORIES found at its file and line in
made-up CUDA and Python sources, comments ignored with line numbers kept, and honest code quiet
(the baseline's kernels and the stubs of every track, copied in as a student's files). No GPU,
under a second.

    python3 -m grader.selftests.python.test_review
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import unittest

from grader import ROOT
from grader.pipeline import review

with open(os.path.join(ROOT, "grader", "rubric.toml"), "rb") as _f:
    OWNED = tomllib.load(_f)["submission"]["owned"]  # track → its student-owned globs

# One line of CUDA C++ per use, with the categories it must be listed under.
CUDA_USES = [
    ("#include <dlfcn.h>", {"libraries and symbols"}),
    ('void* handle = dlopen("libcublas.so", RTLD_NOW);', {"libraries and symbols"}),
    ('auto gemm = dlsym(handle, "cublasSgemm_v2");', {"libraries and symbols"}),
    ("dl_iterate_phdr(visit, nullptr);", {"libraries and symbols"}),
    ('const char* home = std::getenv("HOME");', {"environment"}),
    ("extern char** environ;", {"environment"}),
    (
        'const char* url = "http://x", *v = getenv("V");',
        {"environment"},
    ),  # a string's // starts no comment
    ('std::ifstream maps("/proc/self/maps");', {"/proc or /sys", "files and sockets"}),
    ('const int fd = open("/sys/class/drm", O_RDONLY);', {"/proc or /sys", "files and sockets"}),
    ("const int s = socket(AF_INET, SOCK_STREAM, 0);", {"files and sockets"}),
    ("const pid_t child = fork();", {"processes"}),
    ("execvp(argv[0], argv);", {"processes"}),
    ('std::system("nvidia-smi");', {"processes"}),
    ('FILE* pipe = popen("ls", "r");', {"processes"}),
    ("std::thread worker([] {});", {"threads"}),
    ("pthread_create(&tid, nullptr, run, nullptr);", {"threads"}),
    ("auto done = std::async(std::launch::async, run);", {"threads"}),
    ("syscall(SYS_getpid);", {"system calls"}),
    ('asm volatile("syscall" ::: "rcx", "r11");', {"system calls"}),
    ("mprotect(page, 4096, PROT_READ | PROT_EXEC);", {"system calls"}),
    ("prctl(PR_SET_DUMPABLE, 0);", {"system calls"}),
    ('asm(".incbin \\"kernels.cubin\\"");', {"code from data"}),
    ("cuModuleLoadData(&module, image);", {"code from data"}),
    ("nvrtcCompileProgram(program, 0, nullptr);", {"code from data"}),
]
# Honest kernel code that looks like a use to a careless pattern.
CUDA_HONEST = [
    "const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;",
    'asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));',
    "const float environment_scale = scale[0];  // a name, not the environment",
    "const int systemic = opened + reopened;",
    'const char* url = "http://example.org";  // getenv, in a comment',
]
PYTHON_USES = [
    ("import ctypes", {"libraries and symbols"}),
    ("import importlib", {"libraries and symbols"}),
    ("import subprocess", {"processes"}),
    ("import threading", {"threads"}),
    ('home = os.environ["HOME"]', {"environment"}),
    ('user = os.getenv("USER")', {"environment"}),
    ('with open("/proc/self/maps") as maps:', {"/proc or /sys", "files and sockets"}),
    ('os.system("ls")', {"processes"}),
    ('lib = ctypes.CDLL("libcublas.so")', {"libraries and symbols"}),
]
PYTHON_HONEST = [
    "pid = tl.program_id(0)",
    "copy = out.clone()",
    "x = tl.load(x_ptr + offsets, mask=offsets < n)",
]


def write(tree, rel, text):
    path = os.path.join(tree, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def expected(uses, first_line, path):
    """{(file, line, category)} of uses written one a line from first_line on."""
    return {
        (path, first_line + n, category)
        for n, (_, categories) in enumerate(uses)
        for category in categories
    }


def found(record):
    return {(f["file"], f["line"], f["category"]) for f in record["findings"]}


class Review(unittest.TestCase):
    def setUp(self):
        self.tree = tempfile.mkdtemp(prefix="review-test-")

    def tearDown(self):
        shutil.rmtree(self.tree, ignore_errors=True)

    def test_the_fixtures_cover_every_category(self):
        covered = {c for _, cs in CUDA_USES + PYTHON_USES for c in cs}
        self.assertEqual(covered, set(review.CATEGORIES))

    def test_every_cuda_use_is_found_at_its_line(self):
        head = ["// hacks.cu — every use the review lists, one a line", "#include <cstdlib>"]
        text = "\n".join(head + [code for code, _ in CUDA_USES] + CUDA_HONEST) + "\n"
        write(self.tree, "student/hacks.cu", text)
        record = review.scan(self.tree, OWNED["student"])
        self.assertEqual(record["files"], ["student/hacks.cu"])
        self.assertEqual(found(record), expected(CUDA_USES, len(head) + 1, "student/hacks.cu"))
        self.assertEqual(record["count"], len(record["findings"]))

    def test_every_python_use_is_found_at_its_line(self):
        head = ['"""rmsnorm.py — a Triton kernel file that reads the environment."""', "import os"]
        text = "\n".join(head + [code for code, _ in PYTHON_USES] + PYTHON_HONEST) + "\n"
        write(self.tree, "student/triton/rmsnorm.py", text)
        write(self.tree, "student/linear.cu", 'auto h = dlopen("x", 0);\n')  # not the track's
        record = review.scan(self.tree, OWNED["triton"])
        self.assertEqual(record["files"], ["student/triton/rmsnorm.py"])
        self.assertEqual(
            found(record), expected(PYTHON_USES, len(head) + 1, "student/triton/rmsnorm.py")
        )

    def test_comments_are_ignored_and_line_numbers_kept(self):
        cuda = "\n".join(
            [
                '// getenv, dlopen, fork(), std::thread, syscall, fopen("/proc/x")',
                "int a = 0; /* a block comment that mentions",
                '   dlopen("libcublas.so") and system("ls")',
                "   over several lines */ int b = 1;",
                "/* fork() */ int c = 2;  // socket",
                "// a continued line comment \\",
                '   getenv("HOME") is still comment',
                'const char* home = getenv("HOME");  /* line 8 */',
            ]
        )
        python = "\n".join(
            [
                '"""A docstring naming subprocess, ctypes and open()."""',
                "# import threading",
                "def kernel():",
                '    """getenv in a function docstring."""',
                "    return 1  # os.environ",
                'path = "/proc/self/maps"  # line 6: a string is code',
            ]
        )
        write(self.tree, "student/comments.cu", cuda)
        write(self.tree, "student/triton/comments.py", python)
        self.assertEqual(
            found(review.scan(self.tree, OWNED["student"])),
            {("student/comments.cu", 8, "environment")},
        )
        self.assertEqual(
            found(review.scan(self.tree, OWNED["triton"])),
            {("student/triton/comments.py", 6, "/proc or /sys")},
        )

    def test_a_python_file_that_does_not_parse_is_still_scanned(self):
        write(self.tree, "student/triton/broken.py", 'x = (\nos.system("ls")\n')
        self.assertEqual(
            found(review.scan(self.tree, OWNED["triton"])),
            {("student/triton/broken.py", 2, "processes")},
        )

    def test_honest_kernels_are_quiet(self):
        """The baseline's kernels as a student's files, and every track's stubs as shipped."""
        os.makedirs(os.path.join(self.tree, "student"))
        for path in glob.glob(os.path.join(ROOT, "baseline", "*")):
            if path.endswith((".cu", ".h")):
                shutil.copy(path, os.path.join(self.tree, "student"))
        trees = [("baseline", self.tree, OWNED["student"])]
        trees += [(f"{track} stubs", ROOT, globs) for track, globs in OWNED.items()]
        for what, tree, globs in trees:
            with self.subTest(what):
                record = review.scan(tree, globs)
                self.assertGreater(len(record["files"]), 5)
                self.assertEqual(record["count"], 0, "\n".join(review.render(record)))
                self.assertTrue(review.render(record)[0].startswith("for review: nothing"))

    def test_the_reference_reads_only_its_documented_switches(self):
        """The reference track (instructor tree) reads GLMASR_GEMM and GLMASR_ATTENTION from the
        environment and does nothing else the review lists."""
        sources = [
            p
            for p in glob.glob(os.path.join(ROOT, "reference", "**", "*"), recursive=True)
            if p.endswith((".cu", ".cuh", ".h", ".py"))
        ]
        if not sources:
            self.skipTest("no reference/ sources (an unpacked handout)")
        for n, path in enumerate(sources):
            suffix = ".py" if path.endswith(".py") else os.path.splitext(path)[1]
            shutil.copy(path, os.path.join(self.tree, f"ref{n}{suffix}"))
        record = review.scan(self.tree, ["*.cu", "*.cuh", "*.h", "*.py"])
        self.assertLessEqual({f["match"] for f in record["findings"]}, {"getenv"})

    def test_the_cheat_suites_hand_ins_are_listed(self):
        """The cheats that reach past their kernels (instructor tree) are listed where they do."""
        cheats = os.path.join(ROOT, "grader", "selftests", "cheats")
        if not os.path.isdir(cheats):
            self.skipTest("no grader/selftests/cheats/ (an unpacked handout)")
        record = review.scan(cheats, ["*/student/*.cu", "*/student/*.cuh", "*/student/*.append"])
        listed = {(f["file"].split("/")[0], f["category"]) for f in record["findings"]}
        for cheat, category in [
            ("common", "processes"),  # the forged report's detached writer: fork, execv
            ("common", "/proc or /sys"),
            ("premain_track_swap", "environment"),
            ("runtime_vendor", "libraries and symbols"),  # dl_iterate_phdr, ELF read by hand
            ("runtime_vendor_nosym", "/proc or /sys"),  # /proc/self/maps
        ]:
            self.assertIn((cheat, category), listed)

    def test_render_names_file_line_and_match_and_caps_the_list(self):
        write(self.tree, "student/linear.cu", 'void* h = dlopen("x", 0);\n' * 30)
        record = review.scan(self.tree, OWNED["student"])
        lines = review.render(record, limit=3)
        self.assertEqual(
            lines[0],
            'for review: student/linear.cu:1 dlopen (libraries and symbols) — `void* h = dlopen("x", 0);`',
        )
        self.assertEqual(lines[3], "for review: … and 27 more")
        self.assertEqual(len(lines), 4)

    def test_command_line_scans_a_submission_as_the_intake_takes_it(self):
        """Flat files are the track's folder; a harness file in the hand-in is not scanned."""
        submission = os.path.join(self.tree, "hand-in")
        write(submission, "linear.cu", 'const char* v = getenv("X");\n')
        write(submission, "grader/pipeline/grade.py", "import subprocess\n")
        p = subprocess.run(
            [sys.executable, "-m", "grader.pipeline.review", submission],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(
            p.stdout.splitlines(),
            [
                "for review: student/linear.cu:1 getenv (environment) — "
                '`const char* v = getenv("X");`'
            ],
        )


if __name__ == "__main__":
    unittest.main()
