#!/usr/bin/env python3
"""setup_test.py — tools/setup.sh decides by capability, on Debian and elsewhere (CTest setup).

Each case runs setup.sh with a PATH made from this machine's, less the commands it must not
find: a host without apt-get and dpkg (a RHEL-family cluster node, say) whose dependencies are
all there passes without installing anything; the same host with libraries missing names them
and says what to provide; a Debian host with them missing asks apt-get (a stand-in that records
its arguments) for exactly their packages. Missing libraries are simulated by pointing
pkg-config at an empty folder. Needs what setup.sh checks to be installed here (CI has it).
Standard library only.
"""

import os
import stat
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETUP = os.path.join(ROOT, "tools", "setup.sh")


def host_path(folder, without=(), extra=None):
    """A folder of links to every command of this PATH but the ones named in `without` (by
    prefix), plus `extra` {name: script}; returns it for PATH."""
    os.makedirs(folder)
    for directory in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            link = os.path.join(folder, name)
            target = os.path.join(directory, name)
            if name.startswith(tuple(without)) or os.path.lexists(link):
                continue
            if os.access(target, os.X_OK) and not os.path.isdir(target):
                os.symlink(target, link)
    for name, script in (extra or {}).items():
        path = os.path.join(folder, name)
        if os.path.lexists(path):
            os.remove(path)
        with open(path, "w") as f:
            f.write(script)
        os.chmod(path, stat.S_IRWXU)
    return folder


class Setup(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.empty = os.path.join(self.tmp.name, "no-pkgconfig")
        os.makedirs(self.empty)

    def tearDown(self):
        self.tmp.cleanup()

    def run_setup(self, path, **env):
        full = dict(os.environ, PATH=path, **env)
        return subprocess.run(
            ["bash", SETUP], capture_output=True, text=True, env=full, timeout=120, cwd=ROOT
        )

    def test_a_host_without_apt_that_has_everything_passes(self):
        path = host_path(os.path.join(self.tmp.name, "bin"), without=("apt", "dpkg"))
        p = self.run_setup(path)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("every build dependency is found", p.stdout)

    def test_a_host_without_apt_names_what_to_provide(self):
        path = host_path(os.path.join(self.tmp.name, "bin"), without=("apt", "dpkg"))
        p = self.run_setup(path, PKG_CONFIG_LIBDIR=self.empty, PKG_CONFIG_PATH="")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("missing: libsndfile (pkg-config sndfile)", p.stdout)
        self.assertIn("missing: cpp-httplib", p.stdout)
        self.assertIn("this host has no apt-get: provide the ones above", p.stderr)
        self.assertNotIn("Python", p.stdout)  # found: only what is missing is named

    def test_a_debian_host_installs_exactly_the_missing_packages(self):
        log = os.path.join(self.tmp.name, "apt.log")
        apt = f'#!/bin/sh\necho "$@" >> {log}\n'
        path = host_path(
            os.path.join(self.tmp.name, "bin"),
            without=("apt-get", "dpkg-query", "sudo"),
            extra={
                "apt-get": apt,
                "dpkg-query": "#!/bin/sh\nexit 0\n",  # a Debian host, wherever this runs
                "sudo": '#!/bin/sh\nexec "$@"\n',
            },
        )
        p = self.run_setup(path, PKG_CONFIG_LIBDIR=self.empty, PKG_CONFIG_PATH="")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(log) as f:
            calls = f.read().splitlines()
        install = next(c for c in calls if c.startswith("install"))
        for package in ("libsndfile1-dev", "libsoxr-dev", "libcpp-httplib-dev", "libgtest-dev"):
            self.assertIn(package, install.split())
        for present in ("cmake", "build-essential", "python3"):
            self.assertNotIn(present, install.split())


if __name__ == "__main__":
    unittest.main(verbosity=2)
