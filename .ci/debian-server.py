#!/usr/bin/env python3
"""Fetches a server newer than this machine's Debian offers, from Debian's own archive, into a folder of its own.

Usage: debian-server.py DIR SUITE PACKAGE BINARY NAME

PACKAGE of Debian suite SUITE (the newest the suite holds) is unpacked into DIR/root with the libraries it needs
taken from Debian 13 (trixie): its C library among them, as the suites that carry newer servers are built for a newer
one than Debian 12's. DIR/redis-server then runs BINARY (a path inside the package) with that C library's loader and
those libraries, as NAME (the program name the server goes by), and is what the test harness and the benchmark start.
"""
import lzma
import os
import subprocess
import sys
import tempfile
import urllib.request

ARCHIVE = 'http://deb.debian.org/debian'
LIBRARY_SUITE = 'trixie'
# What redis-server and valkey-server link to (their packages' Depends), and what those link to in turn.
LIBRARIES = ['libc6', 'libgcc-s1', 'libstdc++6', 'libatomic1', 'libssl3t64', 'libzstd1', 'libjemalloc2', 'liblzf1',
             'libsystemd0', 'libcap2']


def packages(suite):
    """Package name -> (version, pool path) of the newest of each in `suite` (amd64, main)."""
    with urllib.request.urlopen(f'{ARCHIVE}/dists/{suite}/main/binary-amd64/Packages.xz', timeout=120) as response:
        text = lzma.decompress(response.read()).decode()
    found = {}
    for stanza in text.split('\n\n'):
        fields = dict(line.split(': ', 1) for line in stanza.splitlines() if ': ' in line and not line.startswith(' '))
        if 'Package' in fields and 'Filename' in fields:
            found[fields['Package']] = (fields['Version'], fields['Filename'])
    return found


def unpack(pool_path, root, work):
    deb = os.path.join(work, os.path.basename(pool_path))
    urllib.request.urlretrieve(f'{ARCHIVE}/{pool_path}', deb)
    subprocess.run(['dpkg-deb', '-x', deb, root], check=True)


def main(folder, suite, package, binary, name):
    root = os.path.join(folder, 'root')
    os.makedirs(root, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        version, pool_path = packages(suite)[package]
        unpack(pool_path, root, work)
        libraries = packages(LIBRARY_SUITE)
        for library in LIBRARIES:
            unpack(libraries[library][1], root, work)
    wrapper = os.path.join(folder, 'redis-server')
    with open(wrapper, 'w') as out:
        out.write('#!/bin/sh\n'
                  f'# {package} {version} from Debian {suite}, on the libraries of Debian {LIBRARY_SUITE} '
                  '(.ci/debian-server.py).\n'
                  'root="$(dirname "$(readlink -f "$0")")/root"\n'
                  'exec "$root/usr/lib64/ld-linux-x86-64.so.2" --library-path "$root/usr/lib/x86_64-linux-gnu" '
                  f'--argv0 {name} "$root/{binary}" "$@"\n')
    os.chmod(wrapper, 0o755)
    print(f'{package} {version} from Debian {suite} in {folder}')


if __name__ == '__main__':
    main(*sys.argv[1:])
