#!/usr/bin/env python3
"""Tests of grader/class_scale/similarity.py on a made-up class: of four submissions, two are one
kernel with its names changed and two are written independently; compare50 must rank the copied
pair first, link each pair to its page, and take the handout's stubs as distribution code. Needs
compare50 (tools/setup.sh --instructor puts it in .venv-tools/); skipped without it. ~5 s.

    python3 -m grader.selftests.python.test_similarity
"""

import os
import shutil
import tempfile
import unittest
import zipfile

from grader import ROOT
from grader.class_scale import batch, similarity
from grader.pipeline import score

RUBRIC = score.load_rubric(os.path.join(ROOT, "grader", "rubric.toml"))

# A row-per-block RMSNorm; the copy renames every variable and moves nothing else.
ORIGINAL = """\
__global__ void rmsnorm_rows(float* out, const float* x, const float* weight, int dim, float eps) {
    extern __shared__ float partial[];
    const float* row = x + blockIdx.x * dim;
    float sum = 0.f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) sum += row[i] * row[i];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    const float scale = rsqrtf(partial[0] / dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        out[blockIdx.x * dim + i] = row[i] * scale * weight[i];
}
"""
RENAMES = {
    "rmsnorm_rows": "my_norm",
    "partial": "smem",
    "row": "xr",
    "sum": "acc",
    "half": "stride",
    "scale": "inv",
}
# Two kernels of the same op written apart: a warp per row, and one thread per row.
INDEPENDENT = [
    """\
__global__ void norm_warp(float* y, const float* in, const float* g, int n, float eps) {
    int lane = threadIdx.x & 31;
    int r = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    double ss = 0.0;
    for (int c = lane; c < n; c += 32) { double v = in[(size_t)r * n + c]; ss += v * v; }
    for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    float k = (float)(1.0 / sqrt(ss / n + eps));
    for (int c = lane; c < n; c += 32) y[(size_t)r * n + c] = g[c] * (in[(size_t)r * n + c] * k);
}
""",
    """\
__global__ void rms_one_thread(float* dst, const float* src, const float* w, int cols, int rows, float e) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float m = 0;
    const float4* p = reinterpret_cast<const float4*>(src + (long)r * cols);
    for (int q = 0; q < cols / 4; ++q) m += p[q].x * p[q].x + p[q].y * p[q].y + p[q].z * p[q].z + p[q].w * p[q].w;
    m = 1.0f / sqrtf(m / cols + e);
    for (int q = 0; q < cols; ++q) dst[(long)r * cols + q] = src[(long)r * cols + q] * m * w[q];
}
""",
]


def renamed(text):
    for old, new in RENAMES.items():
        text = text.replace(old, new)
    return text


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


@unittest.skipIf(similarity.compare50_python() is None, similarity.NOT_INSTALLED)
class Similarity(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="similarity-test-")
        self.class_dir = os.path.join(self.tmp, "class")
        self.out = os.path.join(self.tmp, "out")
        os.makedirs(self.class_dir)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def hand_in(self, name, rmsnorm):
        """A whole handout tree with its student/rmsnorm.cu replaced; "name.zip" zips it."""
        tree = os.path.join(self.tmp, "trees", name)
        shutil.copytree(os.path.join(ROOT, "student"), os.path.join(tree, "student"))
        write(os.path.join(tree, "student", "rmsnorm.cu"), rmsnorm)
        if not name.endswith(".zip"):
            shutil.move(tree, os.path.join(self.class_dir, name))
            return
        with zipfile.ZipFile(os.path.join(self.class_dir, name), "w") as z:
            for here, _, files in os.walk(tree):
                for f in files:
                    full = os.path.join(here, f)
                    z.write(full, os.path.relpath(full, tree))

    def grade_class(self, **kwargs):
        return similarity.similar_pairs(batch.students(self.class_dir), self.out, RUBRIC, **kwargs)

    def test_the_copied_pair_comes_first(self):
        self.hand_in("ada", ORIGINAL)
        self.hand_in("grace <copy>.zip", renamed(ORIGINAL))
        self.hand_in("linus", INDEPENDENT[0])
        self.hand_in("margaret", INDEPENDENT[1])
        result = self.grade_class(limit=10)
        self.assertTrue(result["ran"], result["summary"])
        self.assertEqual(
            {result["pairs"][0]["a"], result["pairs"][0]["b"]}, {"ada", "grace <copy>"}
        )
        others = [p["score"] for p in result["pairs"][1:]]
        self.assertTrue(all(result["pairs"][0]["score"] > 2 * s for s in others), result["pairs"])
        self.assertEqual(result["html"], "similarity/index.html")
        self.assertIn("similarity: compare50 1.2.15 compared 4 submissions", result["summary"])
        # Each pair's link is compare50's page of that pair.
        with open(os.path.join(self.out, result["pairs"][0]["html"]), encoding="utf-8") as f:
            page = f.read()
        self.assertIn("ada", page)
        self.assertIn("grace &lt;copy&gt;", page)
        fragment = similarity.leaderboard_rows(result)
        self.assertIn("grace &lt;copy&gt;", fragment)
        self.assertNotIn("<copy>", fragment)
        self.assertIn('<a href="similarity/match_1.html">', fragment)

    def test_the_handout_is_no_evidence(self):
        """Two untouched handouts share only distribution code: no similar pair."""
        self.hand_in("ada", ORIGINAL)
        shutil.copytree(
            os.path.join(ROOT, "student"), os.path.join(self.class_dir, "bob", "student")
        )
        shutil.copytree(
            os.path.join(ROOT, "student"), os.path.join(self.class_dir, "cy", "student")
        )
        result = self.grade_class()
        self.assertTrue(result["ran"], result["summary"])
        self.assertNotIn({"bob", "cy"}, [{p["a"], p["b"]} for p in result["pairs"]])

    def test_a_refused_submission_is_listed_and_the_rest_compared(self):
        self.hand_in("ada", ORIGINAL)
        self.hand_in("grace", renamed(ORIGINAL))
        with open(os.path.join(self.class_dir, "broken.zip"), "wb") as f:
            f.write(b"PK\x03\x04 not really a zip")
        result = self.grade_class(limit=1)
        self.assertTrue(result["ran"], result["summary"])
        self.assertEqual([(p["a"], p["b"]) for p in result["pairs"]], [("ada", "grace")])
        self.assertEqual([s["name"] for s in result["skipped"]], ["broken"])
        self.assertIn("not compared: broken", similarity.leaderboard_rows(result))

    def test_fewer_than_two_submissions_is_said(self):
        self.hand_in("ada", ORIGINAL)
        result = self.grade_class()
        self.assertFalse(result["ran"])
        self.assertEqual(
            result["summary"], "similarity: not run — fewer than two submissions have student files"
        )


class WithoutCompare50(unittest.TestCase):
    def test_a_missing_compare50_is_said_in_one_line(self):
        pythons = similarity.PYTHONS
        similarity.PYTHONS = ["/nonexistent/python3"]
        try:
            result = similarity.similar_pairs([("a", "/x"), ("b", "/y")], "/nonexistent", RUBRIC)
        finally:
            similarity.PYTHONS = pythons
        self.assertEqual(
            result["summary"],
            "similarity: not run — compare50 is not installed (tools/setup.sh --instructor)",
        )
        self.assertEqual((result["ran"], result["pairs"]), (False, []))
        self.assertEqual(
            similarity.leaderboard_rows(result),
            '<h2 id="similarity">Most similar submissions</h2>\n'
            "<p>similarity: not run — compare50 is not installed "
            "(tools/setup.sh --instructor)</p>",
        )


if __name__ == "__main__":
    unittest.main()
