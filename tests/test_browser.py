"""The kit as a person sees it, in a real browser: JupyterLab running a learner copy, Ray's
dashboard behind its token, and the built site (`make test-browser`; `make browser` installs
Debian's Chromium and its driver). Screenshots go to runs/test/browser/.

Selenium drives the system Chromium through the system chromedriver, with ``SE_OFFLINE`` so
Selenium's manager looks nothing up; Chromium runs headless with its background networking off
(this machine's network is closed, and a learner's browser test should not phone home).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest

from labkit.params import repo_root
from labkit.runtime import procs
from labkit.runtime.net import free_port

pytestmark = [pytest.mark.browser, pytest.mark.network]

ROOT = repo_root()
SHOTS = ROOT / "runs" / "test" / "browser"
FLAGS = (
    "--headless=new",
    "--no-sandbox",  # as root Chromium refuses to start with its sandbox
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
    "--window-size=1400,1000",
)


def skip_or_fail(reason: str):
    """Skip, saying why; where CI asks for the browser tests (REQUIRE_BROWSER=1), fail."""
    if os.environ.get("LABKIT_REQUIRE_BROWSER") == "1":
        pytest.fail(f"the browser tests were required: {reason}")
    pytest.skip(reason)


def why_not() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if sys.platform != "linux":
        return f"the browser tests use Debian's Chromium on Linux; this is {sys.platform}"
    if os.geteuid() != 0:
        return "the browser tests run as root (CI's user), with Chromium's --no-sandbox"
    missing = [b for b in ("chromium", "chromedriver") if not shutil.which(b)]
    if missing:
        return f"{' and '.join(missing)} not installed: run `make browser`"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed: run `make install`"
    return None


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if reason := why_not():
        skip_or_fail(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for flag in (*FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
    driver.set_page_load_timeout(60)
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()


def wait_for(what, condition, timeout: float = 60.0, every: float = 0.5):
    """Poll ``condition()`` until it returns something true; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if got := condition():
                return got
        except Exception:  # the page is still loading or re-rendering
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def shot(driver, name: str) -> Path:
    path = SHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def page_text(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


# ---- JupyterLab ---------------------------------------------------------------------------


def _api(base: str, path: str, token: str, method: str = "GET"):
    req = urllib.request.Request(
        base + path, method=method, headers={"Authorization": f"token {token}"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        body = r.read()
    return json.loads(body) if body else None


def test_jupyterlab_runs_a_learner_copy_to_its_check(browser, tmp_path):
    """`make lab`'s server: a learner opens exercises/01, runs every cell from the keyboard,
    and sees the lesson's outputs and then the check's "is not set yet" message."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    port, token = free_port(), "labkit-browser-token"
    env = dict(
        os.environ,
        LABKIT_LAB_TOKEN=token,
        LABKIT_SIZE="smoke",
        LABKIT_RESULTS_DIR=str(tmp_path / "results"),
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"),
    )
    log = open(tmp_path / "lab.log", "w")  # closed after the server stops
    server = subprocess.Popen(
        [sys.executable, "-m", "labkit", "lab", "--no-browser", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for("JupyterLab", lambda: _api(base, "/api/status", token), timeout=90)
        copy = next(
            p for p in sorted((ROOT / "exercises").glob("01_*.ipynb")) if ".new." not in p.name
        )
        browser.get(f"{base}/lab/tree/exercises/{copy.name}?token={token}")
        wait_for("the notebook", lambda: browser.find_elements(By.CSS_SELECTOR, ".jp-Cell"))
        wait_for(
            "an idle kernel",
            lambda: browser.find_elements(By.CSS_SELECTOR, "[data-status='idle']"),
            timeout=90,
        )
        # JupyterLab's first-run question (news from jupyter.org): answer it as a person would.
        for button in browser.find_elements(By.XPATH, "//button[normalize-space()='No']"):
            button.click()
        # As a person would: click into the notebook, command mode, the command palette.
        browser.find_element(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell").click()
        body = browser.switch_to.active_element
        body.send_keys(Keys.ESCAPE)
        body.send_keys(Keys.CONTROL, Keys.SHIFT, "c")
        palette = wait_for(
            "the command palette",
            lambda: browser.find_element(By.CSS_SELECTOR, ".lm-CommandPalette-input"),
        )
        palette.send_keys("Run All Cells")
        palette.send_keys(Keys.ENTER)

        def check_message():
            for out in browser.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output"):
                if "is not set yet" in out.text:
                    return out
            return None

        message = wait_for("the check's message", check_message, timeout=300, every=2)
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", message)
        shot(browser, "jupyterlab-learner-check")
        assert "write your answer in the cell above" in message.text
        # The lesson ran before the check stopped it: its plot is on the page, drawn.
        drawn = browser.execute_script(
            "return [...document.querySelectorAll('.jp-RenderedImage img')]"
            ".filter(i => i.complete && i.naturalWidth > 0).length"
        )
        assert drawn >= 1, "the lesson's plot did not render"
        # RISE, as an instructor presents the same copy live (Alt+R opens this view): slides
        # from the cells' slide marks, and the right arrow moves to the next one.
        browser.get(f"{base}/rise/exercises/{copy.name}?token={token}")

        def present():
            shown = browser.find_elements(By.CSS_SELECTOR, ".reveal .slides section.present")
            return shown and shown[-1].text.strip()

        first = wait_for("RISE's first slide", present, timeout=90)
        assert first.startswith("01 · Remote tasks"), first[:200]
        shot(browser, "rise-first")
        browser.switch_to.active_element.send_keys(Keys.ARROW_RIGHT)
        second = wait_for("RISE's next slide", lambda: present() != first and present())
        assert second and second != first
        shot(browser, "rise-next")
        # The same address without the token: the login page.
        browser.delete_all_cookies()
        browser.get(f"{base}/lab/tree/exercises/{copy.name}")
        wait_for("the login page", lambda: "/login" in browser.current_url)
        assert browser.find_elements(By.CSS_SELECTOR, "input[type=password]")
        shot(browser, "jupyterlab-login")
    finally:
        try:  # the kernel's Ray stops with the kernel: shut it down, as File > Shut Down does
            for s in _api(base, "/api/sessions", token) or []:
                _api(base, f"/api/sessions/{s['id']}", token, method="DELETE")
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        try:
            tree = procs.with_children([psutil.Process(server.pid)])
        except psutil.Error:
            tree = []
        procs.terminate(tree, timeout=30)
        server.wait(timeout=10)
        log.close()


# ---- the dashboard ------------------------------------------------------------------------


@pytest.mark.ray
def test_dashboard_asks_for_the_token_then_lists_the_nodes(browser):
    """The README's way: the dashboard asks for the token; paste what `ray get-auth-token`
    prints; the Cluster view lists the session's node."""
    import ray
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    import labkit

    session = labkit.start_session(num_cpus=1)
    try:
        url = session.dashboard_url
        assert url and url.startswith("http://127.0.0.1:"), url
        browser.delete_all_cookies()
        browser.get(url + "/#/cluster")
        wait_for("the token dialog", lambda: "Authentication Token Required" in page_text(browser))
        shot(browser, "dashboard-token-required")
        ray_cli = Path(sys.executable).with_name("ray")
        token = (
            subprocess.run(
                [str(ray_cli), "get-auth-token"], capture_output=True, text=True, check=True
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        field = browser.find_element(By.CSS_SELECTOR, "input[type=password]")
        field.send_keys(token, Keys.ENTER)
        node_ip = ray.nodes()[0]["NodeManagerAddress"]
        wait_for(
            "the node list",
            lambda: "ALIVE" in page_text(browser) and node_ip in page_text(browser),
            timeout=60,
        )
        assert "Authentication Token Required" not in page_text(browser)
        shot(browser, "dashboard-nodes")
    finally:
        session.stop()


# ---- the site -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site_url():
    site = ROOT / "runs" / "site"
    if not (site / "index.html").exists():
        skip_or_fail("no built site in runs/site: run `make site` first")

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _local_links_resolve(browser) -> list[str]:
    hrefs = browser.execute_script(
        "return [...document.querySelectorAll('a[href]')].map(a => a.href)"
        ".filter(h => h.startsWith(location.origin))"
    )
    broken = []
    for href in sorted(set(h.split("#")[0] for h in hrefs)):
        try:
            with urllib.request.urlopen(href, timeout=10) as r:
                r.read()
        except urllib.error.HTTPError as e:
            broken.append(f"{href}: {e.code}")
    return broken


def test_site_index_and_a_lesson_render(browser, site_url):
    from selenium.webdriver.common.by import By

    browser.get(site_url + "/index.html")
    wait_for("the index", lambda: "Ray LabKit" in browser.title)
    lessons = [
        a.get_attribute("href")
        for a in browser.find_elements(By.CSS_SELECTOR, "article a[href*='notebooks/']")
    ]
    assert len({h.split("#")[0] for h in lessons}) >= 13, lessons
    assert _local_links_resolve(browser) == []
    shot(browser, "site-index")
    about = json.loads((ROOT / "runs" / "site" / "_labkit.json").read_text())
    lesson = next(d for d in about["executed"] if d.startswith("notebooks/"))
    browser.get(f"{site_url}/{lesson}.html")
    wait_for(lesson, lambda: "The run on this page" in page_text(browser))
    images = wait_for(
        "the lesson's plots",
        lambda: browser.execute_script(
            "const im = [...document.querySelectorAll('article img')];"
            "return im.length && im.every(i => i.complete) ? im.map(i => [i.naturalWidth, i.alt])"
            " : null"
        ),
    )
    assert all(width > 0 and alt for width, alt in images), images
    assert _local_links_resolve(browser) == []
    # The answers are collapsed (unless the site was built with ANSWERS=1): toggles closed.
    closed = browser.execute_script(
        "return [...document.querySelectorAll('details.hide')].filter(d => !d.open).length"
    )
    assert closed >= 1 or about["answers"]
    shot(browser, "site-lesson")


# ---- a lesson's slides --------------------------------------------------------------------


def test_a_lessons_deck_advances_with_nothing_from_another_host(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from labkit.tools import slides

    lesson = ROOT / "notebooks" / "09_serve.ipynb"
    run = ROOT / "runs" / "test"  # make test's run, with its outputs, where there is one
    deck = slides.build(lesson, tmp_path, run=run if (run / lesson.name).exists() else None)

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=tmp_path))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        browser.get(f"{origin}/{deck.name}")
        total = wait_for("reveal.js", lambda: browser.execute_script(
            "return window.Reveal && Reveal.isReady() && Reveal.getTotalSlides()"
        ))  # fmt: skip
        first = browser.execute_script("return Reveal.getCurrentSlide().innerText")
        assert first.lower().startswith("09 · serving models") and total >= 8, (total, first[:200])
        shot(browser, "slides-first")
        body = browser.find_element(By.TAG_NAME, "body")
        seen = [browser.execute_script("return Reveal.getIndices()")]
        for key in (Keys.ARROW_RIGHT, Keys.ARROW_RIGHT):
            body.send_keys(key)
            wait_for("the next slide", lambda: browser.execute_script(
                "return Reveal.getIndices().h"
            ) > seen[-1]["h"])  # fmt: skip
            seen.append(browser.execute_script("return Reveal.getIndices()"))
        now = browser.execute_script("return Reveal.getCurrentSlide().innerText")
        assert now != first and now.strip(), now[:200]  # a different slide, and not empty
        shot(browser, "slides-third")
        loaded = browser.execute_script(
            "return performance.getEntriesByType('resource').map(r => r.name)"
        )
        assert any(u.endswith("/reveal.js/dist/reveal.js") for u in loaded), loaded
        elsewhere = [u for u in loaded if not u.startswith(origin) and not u.startswith("data:")]
        assert elsewhere == [], elsewhere  # nothing from a CDN: the deck works offline
    finally:
        server.shutdown()
