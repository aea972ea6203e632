"""What ``bench_realsites`` needs on the machine: nginx and three Debian documentation packages.

Missing ones are installed with apt-get (as root, non-interactive); a machine where that is not
possible gets one line saying what to install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from bench._realsites_corpus import Corpus

NGINX = "nginx"


def package_version(package: str) -> str:
    """The installed version of a Debian package, or '' when it is not installed."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Status}\t${Version}", package],
                             capture_output=True, text=True, check=False).stdout
    except FileNotFoundError:
        return ""
    status, _, version = out.partition("\t")
    return version if status.endswith(" installed") else ""


def missing(corpora: tuple[Corpus, ...]) -> list[str]:
    wanted = [] if shutil.which("nginx") or Path("/usr/sbin/nginx").exists() else [NGINX]
    return wanted + [c.package for c in corpora if not c.available()]


def ensure_installed(corpora: tuple[Corpus, ...]) -> None:
    """Install what is missing; raise ``RuntimeError`` (one line) if it cannot be done."""
    packages = missing(corpora)
    if not packages:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError(f"bench realsites needs: apt-get install {' '.join(packages)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    print(f"installing {' '.join(packages)} with apt-get", flush=True)
    if subprocess.run(install, env=env, check=False).returncode != 0:
        # Package lists may be missing or stale on a fresh machine.
        subprocess.run(["apt-get", "update", "-q"], env=env, check=False)
        if subprocess.run(install, env=env, check=False).returncode != 0:
            raise RuntimeError(f"apt-get could not install {' '.join(packages)}")
    still = missing(corpora)
    if still:
        raise RuntimeError(f"still missing after apt-get: {' '.join(still)}")
