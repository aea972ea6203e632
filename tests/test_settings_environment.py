"""``WEBCRAWL_REDIS_URL``, ``WEBCRAWL_DATA_DIR`` and ``WEBCRAWL_SITES_DIR`` are read from the
environment (scrapyd, containers), and a ``-s`` setting wins over them: real ``scrapy crawl``
processes with the variables set."""

from __future__ import annotations

from pathlib import Path

from tests._cli import SHOP_SITE, scrapy

# Nothing listens on port 9 of 127.0.0.2: each crawl starts, finds robots.txt unreachable, ends.
NOWHERE = {"WEBCRAWL_DEMO_PORT": "9"}
LOOPBACK = ["-s", "WEBCRAWL_ALLOWED_PRIVATE_NETWORKS=127.0.0.0/8"]


def site_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "envsites"
    folder.mkdir()
    (folder / "envsite.toml").write_text(SHOP_SITE % {"name": "envsite", "budget": 5})
    return folder


def test_redis_url_and_sites_dir_from_the_environment(redis_url: str, tmp_path: Path) -> None:
    env = {"WEBCRAWL_REDIS_URL": redis_url, "WEBCRAWL_SITES_DIR": str(site_folder(tmp_path)),
           **NOWHERE}
    done = scrapy(["crawl", "envsite"], tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    state = scrapy(["crawlstate", "envsite"], tmp_path, env={"WEBCRAWL_REDIS_URL": redis_url})
    assert state.returncode == 0, state.stderr  # the crawl's state is on the server named
    data = tmp_path / ".webcrawl"  # the crawl's own data (its database) lives there, no Redis
    assert not [p.name for p in data.rglob("*") if p.name in ("redis.sock", "dump.rdb", "appendonlydir")]


def test_command_line_settings_win_over_the_environment(redis_url: str, tmp_path: Path) -> None:
    env = {"WEBCRAWL_REDIS_URL": "redis://127.0.0.1:1", "WEBCRAWL_SITES_DIR": "/nope", **NOWHERE}
    done = scrapy(["crawl", "envsite", "-s", f"WEBCRAWL_REDIS_URL={redis_url}",
                   "-s", f"WEBCRAWL_SITES_DIR={site_folder(tmp_path)}"], tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    refused = scrapy(["crawl", "envsite", "-s", "WEBCRAWL_SITES_DIR=/nope/either"], tmp_path,
                     env={**env, "WEBCRAWL_SITES_DIR": str(tmp_path / "envsites")})
    assert refused.returncode == 2 and "'/nope/either' is not a folder" in refused.stderr


def test_data_dir_from_the_environment_and_from_the_command_line(tmp_path: Path) -> None:
    follow = ["crawl", "follow", "-a", "seeds=http://127.0.0.2:9/", *LOOPBACK]
    done = scrapy(follow, tmp_path, env={"WEBCRAWL_DATA_DIR": str(tmp_path / "env")})
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "env" / "appendonly.aof").exists()  # the embedded server lived there
    done = scrapy([*follow, "-s", f"WEBCRAWL_DATA_DIR={tmp_path / 'cmdline'}"], tmp_path,
                  env={"WEBCRAWL_DATA_DIR": str(tmp_path / "env2")})
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "cmdline" / "appendonly.aof").exists()
    assert not (tmp_path / "env2").exists() and not (tmp_path / ".webcrawl").exists()
