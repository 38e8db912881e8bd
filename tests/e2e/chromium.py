"""A real browser for the pages people see: Debian's Chromium driven through its chromedriver (Selenium).

Nothing here downloads a browser: `apt-get install -y chromium chromium-driver` puts both in
/usr/bin. Each browser starts with an empty profile and no background traffic. `host_rules` maps
host names the way DNS would (Chromium's --host-resolver-rules), so a page can send the browser to
a public host name that a server on this machine answers.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

# Debian's packages; another Chromium and its matching driver can be named (CHROMIUM, CHROMEDRIVER).
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1000,900",
)


def require_chromium() -> None:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        # CI installs them (`make install`): there a missing browser is a failure, never a skip.
        (pytest.fail if os.environ.get("CI") else pytest.skip)(
            "needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver), "
            "or CHROMIUM and CHROMEDRIVER naming another Chromium and its driver"
        )


@contextmanager
def chromium(host_rules: str | None = None, trust_any_certificate: bool = False) -> Iterator[Any]:
    require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    if host_rules:
        options.add_argument(f"--host-resolver-rules={host_rules}")
    if trust_any_certificate:  # the stand-in's self-signed certificate on a mapped host
        options.add_argument("--ignore-certificate-errors")
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        driver.set_page_load_timeout(60)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
