#!/usr/bin/env python3
"""Debian unstable's (sid) python3.14 and python3.15 in a private root, as test targets.

sid's packages need a newer glibc than this Debian has, so nothing is installed into the system:
an apt source for sid is kept apart from the system's (its own sources list, lists and cache under
the cache directory), `apt-get download` fetches the interpreters, their headers and sid's libc with
the libraries the stdlib's extension modules link, each .deb is `dpkg -x`-ed into one root, and
patchelf points each interpreter at that root's dynamic loader and libraries (a DT_RPATH, so
extension modules loaded later find them too). The patched interpreter stays at
ROOT/usr/bin/python3.X: its prefix is found from its own path (lib/python3.X/os.py beside it), so
it runs without PYTHONHOME and /proc/PID/exe is the interpreter itself. The packaged interpreter is
stripped; its separate debug info (in python3.X-dbg) goes to ROOT/usr/bin/.debug/, where its
.gnu_debuglink is looked for, for exact mode's symbols.

    python3 tools/sid_pythons.py            # fetch and build once; later runs only check the stamp
    python3 tools/sid_pythons.py --refresh  # ask sid again (a newer micro version replaces the old)

Cache: $GILTY_SID_CACHE, default /root/.cache/gilty/sid-pythons. It holds ROOT (root/), the stamp
(stamp.json: versions, interpreters, include directories) and, when it could not build, the reason
(skip-reason.txt, read by tests/conftest.py). Never exits non-zero: where it cannot work (not root,
no package registry, apt fails) it says why in one line and `make setup`/`make test` go on.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

CACHE = Path(os.environ.get("GILTY_SID_CACHE") or "/root/.cache/gilty/sid-pythons")
ROOT = CACHE / "root"
STAMP = CACHE / "stamp.json"
REASON = CACHE / "skip-reason.txt"
MINORS = ("3.14", "3.15")
# What the test suite was written against (issue 28); sid moving on is reported, not refused.
PINNED = {"3.14": "3.14.10", "3.15": "3.15.2"}
TRIPLET = "x86_64-linux-gnu"
# Bumped when what the root holds changes: an older stamp then rebuilds.
FORMAT = 2
# sid's libc and the libraries the stdlib's extension modules link (_ssl, _sqlite3, _ctypes, zlib,
# _bz2, _lzma, _zstd, _decimal, _uuid, readline, curses, dbm); libgcc-s1 for glibc's own dlopen.
LIBRARIES = (
    "libc6 libgcc-s1 zlib1g libexpat1 libffi8 libssl3t64 libbz2-1.0 liblzma5 libzstd1 libsqlite3-0 "
    "libmpdec4 libuuid1 libcrypt1 libreadline8t64 libtinfo6 libncursesw6 libgdbm6t64 libdb5.3t64 "
    "libnsl2 libtirpc3t64"
).split()
PER_MINOR = ("python{m}-minimal", "libpython{m}-minimal", "libpython{m}-stdlib", "libpython{m}-dev", "python{m}")
# python3.X-dbg carries, beside a --pydebug interpreter, the separate debug info of the standard one
# (the symbols exact mode probes: the packaged interpreter is stripped). Only that one file is kept.
DBG = "python{m}-dbg"
# Run by each built interpreter: the modules the targets use, and where it thinks it lives.
VERIFY = (
    "import asyncio, ssl, sqlite3, ctypes, hashlib, threading, os, sys, platform, json; "
    "print(json.dumps({'version': platform.python_version(), 'exe': os.readlink('/proc/self/exe'), "
    "'prefix': sys.prefix, 'openssl': ssl.OPENSSL_VERSION, 'sqlite': sqlite3.sqlite_version}))"
)


def say(msg: str) -> None:
    print(f"sid-pythons: {msg}", flush=True)


class Skip(Exception):
    """Why the interpreters could not be had; one line."""


def read_stamp() -> dict | None:
    try:
        stamp = json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return None
    if stamp.get("format") != FORMAT:
        return None
    if not all(os.access(v["exe"], os.X_OK) for v in stamp.get("interpreters", {}).values()):
        return None
    return stamp


def system_mirror() -> tuple[str, str]:
    """The Debian archive URI and keyring the system's own apt sources use (deb822 or one-line form)."""
    keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
    files = [Path("/etc/apt/sources.list")] + sorted(Path("/etc/apt/sources.list.d").glob("*"))
    for f in files:
        if not (f.name.endswith(".list") or f.name.endswith(".sources")):
            continue
        try:
            text = f.read_text()
        except OSError:
            continue
        if f.name.endswith(".sources"):
            for stanza in re.split(r"\n\s*\n", text):
                fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
                for uri in fields.get("URIs", "").split():
                    if uri.rstrip("/").endswith("/debian"):
                        return uri.rstrip("/"), fields.get("Signed-By", keyring).strip() or keyring
        else:
            for line in text.splitlines():
                m = re.match(r"\s*deb\s+(?:\[[^]]*\]\s+)?(\S+)", line)
                if m and m.group(1).rstrip("/").endswith("/debian"):
                    return m.group(1).rstrip("/"), keyring
    raise Skip("no Debian archive in /etc/apt/sources.list*: cannot tell which mirror serves sid")


class SidApt:
    """apt-get/apt-cache against a sources list, lists and cache of sid's own, never the system's."""

    def __init__(self, mirror: str, keyring: str):
        self.dir = CACHE / "apt"
        for d in ("etc/sources.list.d", "lists/partial", "cache/archives/partial"):
            (self.dir / d).mkdir(parents=True, exist_ok=True)
        src = self.dir / "etc" / "sources.list"
        src.write_text(f"deb [signed-by={keyring}] {mirror} sid main\n")
        self.opts = [
            f"-o=Dir::Etc::SourceList={src}",
            f"-o=Dir::Etc::SourceParts={self.dir / 'etc/sources.list.d'}",
            f"-o=Dir::State::Lists={self.dir / 'lists'}",
            f"-o=Dir::Cache={self.dir / 'cache'}",
            "-o=APT::Get::List-Cleanup=0",
            "-o=Acquire::Languages=none",
            "-o=Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
            "-o=Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false",
            "-o=Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false",
        ]

    def run(self, tool: str, *args: str, cwd: Path | None = None) -> str:
        try:
            r = subprocess.run([tool, *self.opts, *args], capture_output=True, text=True, cwd=cwd, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise Skip(f"{tool} {args[0]} failed: {e}") from None
        if r.returncode != 0:
            lines = r.stderr.strip().splitlines()
            # apt's first complaint names the cause (a name that did not resolve, a refused signature).
            first = next((ln for ln in lines if ln[:2] in ("E:", "W:")), lines[-1] if lines else f"exit status {r.returncode}")
            verb = next((a for a in args if not a.startswith("-")), "")
            raise Skip(f"{tool} {verb} against sid failed: {first[:200]}")
        return r.stdout

    def sid_versions(self, pkgs: list[str]) -> dict[str, str]:
        """sid's version of each package that sid has, in one apt-cache call (each call reads the lists)."""
        out = self.run("apt-cache", "policy", *pkgs)
        found: dict[str, str] = {}
        pkg = version = None
        for line in out.splitlines():
            if re.match(r"^\S+:$", line):
                pkg, version = line[:-1], None
            elif m := re.match(r"^ (?:\*\*\*|   ) (\S+) \d+$", line):
                version = m.group(1)
            elif pkg and version and pkg not in found and " sid/" in line:
                found[pkg] = version
        return found


def need_patchelf() -> str:
    exe = shutil.which("patchelf")
    if exe:
        return exe
    # The system's own suite has it; nothing comes from sid. `make test` runs system-deps' apt-get beside
    # this: wait for dpkg's lock rather than fail on it.
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "-qq", "patchelf"]
    r = subprocess.run(install, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=600", "update", "-qq"], capture_output=True, env=env)
        subprocess.run(install, capture_output=True, env=env)
    exe = shutil.which("patchelf")
    if not exe:
        raise Skip("patchelf is not installed and apt-get install patchelf failed")
    return exe


def build(refresh_lists: bool, previous: dict | None = None) -> dict:
    mirror, keyring = system_mirror()
    apt = SidApt(mirror, keyring)
    if refresh_lists or not any((apt.dir / "lists").glob("*_Packages")):
        apt.run("apt-get", "-qq", "--error-on=any", "update")
    debs = CACHE / "debs"
    debs.mkdir(exist_ok=True)
    per_minor = {m: [p.format(m=m) for p in PER_MINOR + (DBG,)] for m in MINORS}
    sid = apt.sid_versions([p for names in per_minor.values() for p in names] + list(LIBRARIES))
    wanted: dict[str, str] = {}
    missing: dict[str, str] = {}
    for m, names in per_minor.items():
        if f"python{m}-minimal" not in sid:
            missing[m] = f"sid has no python{m}-minimal"
            continue
        wanted.update({p: sid[p] for p in names if p in sid})
    if not wanted:
        raise Skip("; ".join(missing.values()))
    for p in LIBRARIES:
        if p in sid:
            wanted[p] = sid[p]
        else:
            say(f"sid has no {p}; going on without it")
    if previous and previous.get("packages") == wanted:
        return previous  # sid has not moved: the root stays as it is (tests may be using it)
    apt.run("apt-get", "-qq", "download", *sorted(f"{p}={v}" for p, v in wanted.items()), cwd=debs)
    # Only the .debs of the versions just chosen go into the root; older ones are dropped from the cache.
    files = []
    for p, v in sorted(wanted.items()):
        pattern = f"{p}_{v.replace(':', '%3a')}_*.deb"
        found = sorted(debs.glob(pattern))
        if not found:
            raise Skip(f"apt-get download left no {pattern}")
        files += found
    for old in set(debs.glob("*.deb")) - set(files):
        old.unlink()

    shutil.rmtree(ROOT, ignore_errors=True)
    ROOT.mkdir(parents=True)
    dbg_names = {DBG.format(m=m) for m in MINORS}
    dbg_debs = [f for f in files if f.name.split("_")[0] in dbg_names]
    for f in files:
        if f in dbg_debs:
            continue
        r = subprocess.run(["dpkg", "-x", str(f), str(ROOT)], capture_output=True, text=True)
        if r.returncode != 0:
            raise Skip(f"dpkg -x {f.name} failed: {r.stderr.strip()}")

    patchelf = need_patchelf()
    libdir = ROOT / "usr" / "lib" / TRIPLET
    loader = libdir / "ld-linux-x86-64.so.2"
    if not loader.exists():
        raise Skip(f"sid's libc6 has no {loader.relative_to(ROOT)}")
    interpreters = {}
    for m in MINORS:
        if m in missing:
            continue
        exe = ROOT / "usr" / "bin" / f"python{m}"
        if not exe.is_file():
            missing[m] = f"python{m}-minimal has no usr/bin/python{m}"
            continue
        # Patched in place: the interpreter finds its prefix (ROOT/usr) from its own path.
        r = subprocess.run(
            [patchelf, "--set-interpreter", str(loader), "--force-rpath", "--set-rpath", str(libdir), str(exe)],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            missing[m] = f"patchelf on python{m} failed: {r.stderr.strip()}"
            continue
        r = subprocess.run(
            [str(exe), "-I", "-c", VERIFY], capture_output=True, text=True, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        )
        if r.returncode != 0:
            missing[m] = f"sid's python{m} does not run: {(r.stderr.strip().splitlines() or ['?'])[-1]}"
            continue
        info = json.loads(r.stdout)
        if info["exe"] != str(exe) or info["prefix"] != str(ROOT / "usr"):
            missing[m] = f"sid's python{m} runs as {info['exe']} with prefix {info['prefix']}, not {exe} with {ROOT / 'usr'}"
            continue
        debug = install_debug_file(exe, [f for f in dbg_debs if f.name.startswith(DBG.format(m=m) + "_")])
        interpreters[m] = {
            "version": info["version"],
            "exe": str(exe),
            "prefix": str(ROOT / "usr"),
            "include": str(ROOT / "usr" / "include" / f"python{m}"),
            "include_arch": str(ROOT / "usr" / "include" / TRIPLET / f"python{m}"),
            "openssl": info["openssl"],
            "sqlite": info["sqlite"],
            "package": wanted[f"python{m}-minimal"],
            "debug_file": debug,
        }
    if not interpreters:
        raise Skip("; ".join(missing.values()))
    return {
        "format": FORMAT,
        "mirror": mirror,
        "libc6": wanted.get("libc6"),
        "interpreters": interpreters,
        "missing": missing,
        "packages": wanted,
    }


def install_debug_file(exe: Path, debs: list[Path]) -> str | None:
    """The interpreter's separate debug file from python3.X-dbg, placed where its .gnu_debuglink is
    looked for (beside it, in .debug/), so a tool resolving its symbols finds them without anything in
    the system's /usr/lib/debug. None when the package or the matching file is missing."""

    def readelf(*args: str) -> str:  # the debuglink's CRC follows its name: not all UTF-8
        return subprocess.run(["readelf", *args, str(exe)], capture_output=True, encoding="utf-8", errors="replace").stdout

    notes, link = readelf("-n"), readelf("-p", ".gnu_debuglink")
    build_id = re.search(r"Build ID: ([0-9a-f]+)", notes)
    name = re.search(r"\]\s+(\S+\.debug)", link)
    if not debs or not build_id or not name:
        return None
    member = f"./usr/lib/debug/.build-id/{build_id.group(1)[:2]}/{build_id.group(1)[2:]}.debug"
    dest = exe.parent / ".debug" / name.group(1)
    dest.parent.mkdir(exist_ok=True)
    # Only the one member: the package's other files (the debug interpreter, 60+ MB) are not needed.
    dpkg = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(debs[0])], stdout=subprocess.PIPE)
    with open(dest, "wb") as out:
        tar = subprocess.run(["tar", "-xO", "-f", "-", member], stdin=dpkg.stdout, stdout=out, stderr=subprocess.PIPE)
    dpkg.stdout.close()
    dpkg.wait()
    if tar.returncode != 0 or dest.stat().st_size == 0:
        dest.unlink(missing_ok=True)
        return None
    return str(dest)


def report(stamp: dict, cached: bool) -> None:
    for m in MINORS:
        info = stamp["interpreters"].get(m)
        if info is None:
            say(f"{m}: skipped: {stamp['missing'].get(m, 'not built')}")
            continue
        pin = PINNED.get(m)
        vs = "as the suite pins" if info["version"] == pin else f"the suite pins {pin}: sid has moved on"
        symbols = "symbols from python" + m + "-dbg" if info.get("debug_file") else "no symbols (python" + m + "-dbg missing)"
        say(f"{m}: CPython {info['version']} ({vs}) at {info['exe']}, {symbols}{' (cached)' if cached else ''}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--refresh", action="store_true", help="update sid's package lists and rebuild if they moved on")
    args = ap.parse_args()
    stamp = read_stamp()
    if stamp and not args.refresh:
        report(stamp, cached=True)
        return 0
    if os.geteuid() != 0:
        msg = "not root: sid's python3.14/3.15 not fetched (their tests skip)"
        say(msg)
        return 0
    try:
        CACHE.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        say(f"cannot create the cache {CACHE}: {e.strerror}")
        return 0
    # `make -j` may start this twice; the second waits and then finds the stamp.
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = read_stamp()
        if stamp and not args.refresh:
            report(stamp, cached=True)
            return 0
        try:
            new = build(refresh_lists=args.refresh, previous=stamp)
        except Exception as e:  # noqa: BLE001 -- make setup/test go on; the tests skip with this line
            if not isinstance(e, Skip):
                e = Skip(f"tools/sid_pythons.py failed: {type(e).__name__}: {e}")
            STAMP.unlink(missing_ok=True)
            REASON.write_text(f"{e}\n")
            say(f"skipped: {e}")
            return 0
        if stamp and stamp["packages"] == new["packages"]:
            say("sid serves the same packages as before")
        STAMP.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
        REASON.unlink(missing_ok=True)
        if new["missing"]:
            REASON.write_text("".join(f"{m}: {why}\n" for m, why in sorted(new["missing"].items())))
        report(new, cached=False)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
