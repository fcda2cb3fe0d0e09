#!/usr/bin/env python3
"""`glmasr serve` end to end (run by CTest: serve_test.py GLMASR), on the cpu track, 127.0.0.1 only.

The JSON API: health, tracks, sample clips, a transcription equal to `glmasr transcribe`'s, the
per-op profile, bad uploads (empty, not audio, too large, too long, no file, bad fields) each a
4xx with the CLI's one-line message, a queue that answers 503 when full, and a server that is
still healthy after all of it. The page: headless Chromium (Debian's chromium) loads it, takes a
sample clip, transcribes it through the page's own upload code, and the transcript must be in
the DOM it built; a screenshot of the page (without a run) is made. Where glmasr was built without cpp-httplib (it says so),
both are skipped with that line. Standard library only.
"""

import concurrent.futures
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request
import uuid
import wave

GLMASR = None
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "assets/models/glm-asr-tiny")
CLIPS = os.path.join(ROOT, "assets/audio")
CONCORD = os.path.join(CLIPS, "concord.wav")


def start_server(*extra):
    """A `glmasr serve` on a free port of 127.0.0.1: (process, base URL)."""
    p = subprocess.Popen(
        [
            GLMASR,
            "serve",
            "--model",
            MODEL,
            "--track",
            "cpu",
            "--port",
            "0",
            "--clips",
            CLIPS,
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    line = p.stdout.readline()  # "glmasr serve: listening on http://127.0.0.1:PORT/ ..."
    if "listening on" not in line:
        p.kill()
        raise AssertionError(f"serve did not start: {line!r} {p.stderr.read()!r}")
    return p, line.split("listening on ")[1].split()[0].rstrip("/")


def stop(server):
    server.kill()
    server.wait()
    server.stdout.close()
    server.stderr.close()


def request(url, data=None, content_type=None, timeout=300):
    """(status, JSON or bytes) of a GET, or of a POST of data."""
    headers = {"Content-Type": content_type} if content_type else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, data=data, headers=headers), timeout=timeout
        ) as r:
            body, status, kind = r.read(), r.status, r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        body, status, kind = e.read(), e.code, e.headers.get("Content-Type", "")
    return status, json.loads(body) if "json" in kind else body


def multipart(fields, files):
    """(body, content type) of a multipart/form-data form: fields {name: text}, files
    {name: (filename, bytes)}."""
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
            f"{value}\r\n".encode()
        )
    for name, (filename, content) in files.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
            f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
            + content
            + b"\r\n"
        )
    return b"".join(
        parts
    ) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def transcribe(base, audio, name="clip.wav", **fields):
    body, kind = multipart(
        {k: str(v) for k, v in fields.items()},
        {"audio": (name, audio)} if audio is not None else {},
    )
    return request(base + "/transcribe", body, kind)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def silence_wav(seconds, tone=True):
    """WAV bytes of `seconds` at 8 kHz: a tone, or silence."""
    with tempfile.NamedTemporaryFile(suffix=".wav", delete=False) as f:
        path = f.name
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(
            b"".join(
                struct.pack("<h", int(3000 * math.sin(i / 3)) if tone else 0)
                for i in range(8000 * seconds)
            )
        )
    data = read(path)
    os.remove(path)
    return data


def serve_absent():
    """The reason this glmasr has no server (built without cpp-httplib), or None."""
    p = subprocess.run(
        [GLMASR, "serve", "--model", MODEL, "--port", "-1"], capture_output=True, text=True
    )
    return p.stderr.strip() if "found no cpp-httplib" in p.stderr else None


class Api(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if serve_absent():  # e.g. the GPU machine, whose carried packages lack cpp-httplib
            raise unittest.SkipTest(serve_absent())
        cls.server, cls.base = start_server(
            "--max-upload-mb", "1", "--max-seconds", "20", "--queue", "1"
        )

    @classmethod
    def tearDownClass(cls):
        stop(cls.server)

    def test_health_tracks_clips_page(self):
        self.assertEqual(request(self.base + "/health")[1]["status"], "ok")
        status, tracks = request(self.base + "/tracks")
        self.assertEqual(tracks["default"], "cpu")
        self.assertIn(
            {"name": "cpu", "available": True},
            [{k: t[k] for k in ("name", "available")} for t in tracks["tracks"]],
        )
        self.assertIn("rmsnorm", tracks["ops"])
        self.assertIn("concord.wav", request(self.base + "/clips")[1]["clips"])
        self.assertEqual(request(self.base + "/clips/concord.wav")[1], read(CONCORD))
        self.assertEqual(request(self.base + "/clips/..%2Fconfig.json")[0], 404)
        status, page = request(self.base + "/")
        self.assertEqual(status, 200)
        self.assertIn(b"<title>GLM-ASR Kernel Lab</title>", page)
        self.assertNotIn(b"http://", page.replace(b"http://127.0.0.1", b""))  # no CDN, no network
        self.assertNotIn(b"https://", page)

    def test_transcription_equals_the_cli(self):
        cli = subprocess.run(
            [
                GLMASR,
                "transcribe",
                CONCORD,
                "--model",
                MODEL,
                "--track",
                "cpu",
                "--json",
                "--max-new-tokens",
                "60",
            ],
            capture_output=True,
            text=True,
        )
        self.assertEqual(cli.returncode, 0, cli.stderr)
        status, out = transcribe(self.base, read(CONCORD), "concord.wav", max_new_tokens=60)
        self.assertEqual(status, 200, out)
        self.assertEqual(
            (out["text"], out["tokens"]),
            (json.loads(cli.stdout)["text"], json.loads(cli.stdout)["tokens"]),
        )
        self.assertEqual(out["track"], "cpu")
        self.assertIn("decode", out["timing_ms"])
        self.assertNotIn("profile", out)

    def test_profile_of_a_run_with_a_mix(self):
        status, out = transcribe(
            self.base, read(CONCORD), max_new_tokens=20, profile=1, ops="rmsnorm=cpu"
        )
        self.assertEqual(status, 200, out)
        ops = {p["op"]: p for p in out["profile"]}
        self.assertGreater(ops["linear"]["calls"], 0)
        self.assertGreater(ops["linear"]["ms"], 0)
        self.assertEqual(out["profile"], sorted(out["profile"], key=lambda p: -p["ms"]))

    def test_bad_uploads_get_4xx_and_the_server_goes_on(self):
        cases = [
            ("empty file", transcribe(self.base, b"", "empty.wav"), 400, "empty.wav: empty file"),
            (
                "not audio",
                transcribe(self.base, b"hello\n" * 100, "notes.txt"),
                400,
                "notes.txt: not a readable audio file",
            ),
            (
                "silence",
                transcribe(self.base, silence_wav(2, tone=False), "quiet.wav"),
                400,
                "quiet.wav: the audio is silent",
            ),
            (
                "too long",
                transcribe(self.base, silence_wav(25), "long.wav"),
                413,
                "long.wav: 25 s of audio is longer than this server's limit of 20 s",
            ),
            (
                "too large",
                transcribe(self.base, b"\0" * (2 << 20), "big.wav"),
                413,
                "larger than this server's limit of 1 MB",
            ),
            ("no file", transcribe(self.base, None), 400, '"audio" file'),
            (
                "no form",
                request(self.base + "/transcribe", b"raw bytes", "text/plain"),
                400,
                '"audio" file',
            ),
            (
                "unknown track",
                transcribe(self.base, read(CONCORD), track="tpu"),
                400,
                "unknown track 'tpu'",
            ),
            (
                "bad ops",
                transcribe(self.base, read(CONCORD), ops="frobnicate=cpu"),
                400,
                "frobnicate",
            ),
            (
                "bad max_new_tokens",
                transcribe(self.base, read(CONCORD), max_new_tokens="lots"),
                400,
                "max_new_tokens must be a positive integer",
            ),
            (
                "unknown path",
                request(self.base + "/nowhere"),
                404,
                "no such endpoint: GET /nowhere",
            ),
        ]
        for what, (status, out), expected, needle in cases:
            with self.subTest(what):
                self.assertEqual(status, expected, out)
                self.assertIn(needle, out["error"])
                self.assertNotIn(tempfile.gettempdir() + "/glmasr-serve-", out["error"])
        self.assertEqual(request(self.base + "/health")[1]["status"], "ok")

    def test_a_full_queue_answers_503(self):
        # --queue 1: one request runs, one waits, the rest are turned away at once.
        audio = read(CONCORD)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(
                pool.map(lambda _: transcribe(self.base, audio, max_new_tokens=40), range(4))
            )
        statuses = sorted(status for status, _ in results)
        self.assertEqual(statuses.count(200) + statuses.count(503), 4, results)
        self.assertGreaterEqual(statuses.count(200), 1)
        self.assertGreaterEqual(statuses.count(503), 1)
        self.assertIn("busy", next(out["error"] for status, out in results if status == 503))
        self.assertEqual(request(self.base + "/health")[1]["waiting"], 0)


def chromium():
    return next((c for c in ("chromium", "chromium-browser") if shutil.which(c)), None)


@unittest.skipUnless(chromium(), "no chromium (tools/setup.sh --instructor installs it)")
class Page(unittest.TestCase):
    def test_the_page_transcribes_a_sample_clip(self):
        if serve_absent():
            self.skipTest(serve_absent())
        server, base = start_server()
        tmp = tempfile.mkdtemp(prefix="glmasr-serve-page-")
        try:
            browser = [
                chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={tmp}/profile",
                "--window-size=1200,900",
                "--virtual-time-budget=60000",
            ]
            page = base + "/?clip=concord.wav&autorun=1&profile=1&max_new_tokens=60"
            started = time.time()
            dom = subprocess.run(
                browser + ["--dump-dom", page], capture_output=True, text=True, timeout=240
            )
            self.assertEqual(dom.returncode, 0, dom.stderr[-2000:])
            cli = subprocess.run(
                [
                    GLMASR,
                    "transcribe",
                    CONCORD,
                    "--model",
                    MODEL,
                    "--track",
                    "cpu",
                    "--max-new-tokens",
                    "60",
                ],
                capture_output=True,
                text=True,
            )
            text = cli.stdout.strip()
            self.assertTrue(text)
            self.assertIn(
                f'<div id="transcript">{text}</div>',
                dom.stdout,
                f"after {time.time() - started:.0f} s: {dom.stdout[-3000:]}",
            )
            self.assertIn("Per-op profile of this run:", dom.stdout)
            # The screenshot checks that the page renders; the transcription through the page was
            # checked above, and a second profiled one costs minutes in a sanitizer build.
            shot = os.path.join(tmp, "page.png")
            subprocess.run(
                browser + [f"--screenshot={shot}", base + "/?clip=concord.wav"],
                capture_output=True,
                timeout=240,
            )
            self.assertEqual(read(shot)[:8], b"\x89PNG\r\n\x1a\n")
            self.assertGreater(os.path.getsize(shot), 10000)
        finally:
            stop(server)
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    GLMASR = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
