"""Drive the web console with a real browser for end-to-end tests: Debian's
Chromium (``/usr/bin/chromium``, headless) through Playwright's sync API,
against the console that ``racksmith up`` serves at ``<API URL>/console/``
(the API server's self-signed CA is not trusted by the browser: TLS errors
are ignored). Owns launching and closing the browser, logging in with an API
token, opening a route, full-page screenshots, and the page's uncaught
JavaScript errors (a test asserts there are none).

Screenshots go to ``$RACKSMITH_SCREENSHOTS`` when set — ``make
console-screenshots`` sets it to docs/console/ to refresh the guide's
pictures — else to the artifacts folder ``$RACKSMITH_ARTIFACTS/console``
(default ``.artifacts/console``, ignored by git): ``make test`` never
writes into docs/."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import (
    Browser,
    BrowserContext,
    Page,
    Playwright,
    ViewportSize,
    expect,
    sync_playwright,
)

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
VIEWPORT: ViewportSize = {"width": 1440, "height": 900}
PAGE_LOAD_MS = 15_000
"""How long a route change may take to show its page (seconds in practice)."""
ROOT = Path(__file__).resolve().parents[2]


def shots_dir() -> Path:
    """Where screenshots are written (see the module docstring)."""
    explicit = os.environ.get("RACKSMITH_SCREENSHOTS")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("RACKSMITH_ARTIFACTS") or ROOT / ".artifacts") / "console"


@dataclass
class Console:
    """One browser tab on the console of an API server at ``url``."""

    url: str
    playwright: Playwright
    browser: Browser
    context: BrowserContext
    page: Page
    errors: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"{self.url.rstrip('/')}/console/"

    def open(self, route: str = "") -> Page:
        """Load the console (a fresh page load) at ``route`` (e.g. ``#/hosts``)."""
        self.page.goto(self.base + route)
        return self.page

    def go(self, route: str) -> Page:
        """Switch route in the running app, as a link does (a hash change, no reload)."""
        self.page.evaluate("""(r) => new Promise((done) => {
            if (location.hash === r) return done();
            addEventListener("hashchange", () => done(), { once: true });  // after the router's
            location.hash = r;
        })""", route)
        expect(self.page.locator("main h1")).to_have_count(1, timeout=PAGE_LOAD_MS)
        return self.page

    def nav(self, name: str) -> Page:
        """Click the link ``name`` of the Main navigation; wait for its page's heading."""
        self.page.get_by_role("navigation", name="Main").get_by_role("link", name=name).click()
        expect(self.page.locator("main h1")).to_have_text(name, timeout=PAGE_LOAD_MS)
        return self.page

    def login(self, token: str) -> None:
        """Log in with ``token`` from the login form and wait for the overview."""
        if self.page.url == "about:blank":
            self.open()
        token_box = self.page.get_by_label("API token")
        expect(token_box).to_be_visible(timeout=30_000)
        token_box.fill(token)
        self.page.get_by_role("button", name="Log in").click()
        expect(self.page.get_by_role("navigation", name="Main")).to_be_visible(timeout=30_000)

    def logged_in(self) -> bool:
        return self.page.get_by_role("navigation", name="Main").is_visible()

    def clear_notices(self) -> None:
        """Remove the notices earlier actions left (they would clutter screenshots)."""
        self.page.evaluate("() => document.getElementById('notices')?.replaceChildren()")

    def screenshot(self, name: str) -> Path:
        """Save a full-page PNG as <shots_dir()>/<name>.png."""
        shots = shots_dir()
        shots.mkdir(parents=True, exist_ok=True)
        path = shots / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def close(self) -> None:
        try:
            self.context.close()
            self.browser.close()
        finally:
            self.playwright.stop()


def launch(url: str, executable: Path = CHROMIUM) -> Console:
    """Start headless Chromium with one tab, ready to open the console at ``url``."""
    pw = sync_playwright().start()
    try:
        browser = pw.chromium.launch(executable_path=str(executable), headless=True,
                                     args=CHROMIUM_ARGS)
        context = browser.new_context(ignore_https_errors=True, viewport=VIEWPORT)
        page = context.new_page()
    except BaseException:
        pw.stop()
        raise
    console = Console(url, pw, browser, context, page)
    page.on("pageerror", lambda exc: console.errors.append(f"uncaught: {exc}"))
    return console
