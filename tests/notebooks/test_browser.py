"""The workshop as a participant sees it: JupyterLab in a real (headless) Chromium, Run All, local mode.

One JupyterLab (from this project's environment) and one browser run notebooks 00 to 05 and 08 in
order, each with Run All, on copies of the notebooks under ``.workshop/browser/`` (the committed
notebooks stay without outputs). For each notebook it checks what nbmake cannot see: the widgets
render as widgets (not as their text) and values typed into them reach the kernel, the decision
charts appear, no markdown cell typesets currency as maths, no cell shows a traceback, and labels
are not cut off. Screenshots and the executed notebooks stay in ``.workshop/browser/`` as artefacts.

Chromium comes from Debian (``apt-get install chromium``; ``make browser`` installs it when run as
root) and Playwright (the ``dev`` extra) drives it; nothing is downloaded at run time. Everything
started here (JupyterLab and its kernels, the emulator and local endpoints the notebooks start) is
stopped at the end, pass or fail.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from workshop_lib.config import repo_root
from workshop_lib.local import rehearsal

pytestmark = pytest.mark.slow

NOTEBOOKS = [
    "00_setup",
    "01_package_model",
    "02_deploy_standard_endpoint",
    "03_build_decision_image",
    "04_deploy_decision_endpoints",
    "05_invoke_decisions",
    "08_cleanup",
]
ARTEFACTS = repo_root() / ".workshop" / "browser"
NOTEBOOK_TIMEOUT_S = 900  # a generous bound for a loaded CI machine; a stuck notebook fails, it never hangs
# JupyterLab settings for the run: every cell attached to the page (so every cell can be checked),
# no news or update checks (nothing fetched from the internet).
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
}


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip(
            "the browser check needs the Debian package 'chromium' (apt-get install chromium; "
            "make browser installs it when run as root)"
        )
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A JupyterLab server in its own process group, and its REST API."""

    def __init__(self, root: Path, env: dict[str, str], log: Path):
        self.port = _free_port()
        self.token = os.urandom(16).hex()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = open(log, "w")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                "--ip=127.0.0.1",
                f"--port={self.port}",
                f"--ServerApp.root_dir={root}",
                f"--IdentityProvider.token={self.token}",
                "--LabApp.expose_app_in_browser=True",
                "--LabApp.extension_manager=readonly",
                "--ServerApp.allow_root=True",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    def api(self, path: str, method: str = "GET"):
        request = urllib.request.Request(
            f"{self.url}/api/{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            body = reply.read()
        return json.loads(body) if body else None

    def wait_ready(self, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.process.returncode}; see {self._log.name}")
            try:
                self.api("status")
                return
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"JupyterLab did not answer within {timeout_s:.0f} s; see {self._log.name}")

    def shutdown_kernels(self) -> None:
        for session in self.api("sessions"):
            self.api(f"sessions/{session['id']}", "DELETE")
        for kernel in self.api("kernels"):
            self.api(f"kernels/{kernel['id']}", "DELETE")

    def stop(self) -> None:
        try:
            if self.process.poll() is None:
                self.shutdown_kernels()  # kernels run in sessions of their own: end them through the server
        except OSError:
            pass
        finally:
            for sig, wait_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
                try:
                    os.killpg(self.process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.process.wait(wait_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
            self._log.close()


@pytest.fixture(scope="module")
def lab(monkeypatch_module):
    chromium = _chromium()
    pytest.importorskip(
        "playwright.sync_api",
        reason="the browser check needs the Python package 'playwright' (the dev extra: pip install -e '.[dev]')",
    )
    run_env = {
        "WORKSHOP_MODE": "local",
        "WORKSHOP_CONFIG": str(ARTEFACTS / "config.json"),
        "WORKSHOP_LOCAL_DIR": str(ARTEFACTS / "local"),
    }
    for key in (
        "WORKSHOP_DEPLOY_PATH",
        "WORKSHOP_RESET_REHEARSAL",
        "WORKSHOP_DELETE_BUCKET",
        "WORKSHOP_REGION",
        "WORKSHOP_BUCKET",
    ):
        monkeypatch_module.delenv(key, raising=False)
    for key, value in run_env.items():  # this process stops what the notebooks start, from the same registry
        monkeypatch_module.setenv(key, value)
    rehearsal.default().stop_all()  # anything an interrupted earlier run left, before its registry is removed
    shutil.rmtree(ARTEFACTS, ignore_errors=True)
    root = ARTEFACTS / "notebooks"
    root.mkdir(parents=True)
    for name in NOTEBOOKS:
        shutil.copy(repo_root() / "notebooks" / f"{name}.ipynb", root)
    shutil.copy(repo_root() / "notebooks" / "studio_setup.py", root)
    for path, values in SETTINGS.items():
        target = ARTEFACTS / "settings" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    (ARTEFACTS / "screenshots").mkdir()
    venv_bin = Path(sys.executable).parent
    env = {
        **os.environ,
        **run_env,
        "JUPYTER_PATH": str(venv_bin.parent / "share" / "jupyter"),
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "JUPYTERLAB_SETTINGS_DIR": str(ARTEFACTS / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(ARTEFACTS / "workspaces"),
        "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1",
    }
    server = Lab(root, env, ARTEFACTS / "jupyterlab.log")
    try:
        server.wait_ready()
        server.chromium = chromium
        yield server
    finally:
        server.stop()
        rehearsal.default().stop_all()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


# What the page is asked, in JupyterLab's own terms (window.jupyterapp: --LabApp.expose_app_in_browser).
PROGRESS_JS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.sessionContext || !panel.content) return null;
  const cells = panel.content.widgets.filter(c => c.model.type === 'code');
  return {
    kernel: panel.sessionContext.session?.kernel?.status ?? 'none',
    pending: cells.filter(c => (c.promptNode?.textContent ?? '').includes('*')).length,
    counts: cells.map(c => c.model.executionCount),
    errors: cells.flatMap((c, i) => c.model.outputs.toJSON()
      .filter(o => o.output_type === 'error').map(o => `code cell ${i}: ${o.ename}: ${o.evalue}`)),
  };
}"""


def run_all(page, name: str) -> dict:
    """Open the notebook and Run All; returns the kernel's state and every code cell's count and errors."""
    from playwright.sync_api import TimeoutError as PageTimeout

    for attempt in (1, 2):  # a page that never shows the opened notebook (seen once in CI) is loaded again, once
        page.evaluate(
            "async path => { await window.jupyterapp.commands.execute('docmanager:open', {path}); }", f"{name}.ipynb"
        )
        try:
            page.wait_for_function(
                """name => {
              const panel = window.jupyterapp.shell.currentWidget;
              return panel && panel.context && panel.context.path === name && panel.sessionContext.session?.kernel
                && panel.content.widgets.length > 0;
            }""",
                arg=f"{name}.ipynb",
                timeout=90_000,
            )
            break
        except PageTimeout:
            if attempt == 2:
                raise
            page.reload(timeout=180_000)
            page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=180_000)
            page.evaluate("async () => { await window.jupyterapp.started; }")
    page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.sessionContext.ready; }")
    finished = page.evaluate(
        """async timeout_ms => {
      const run = window.jupyterapp.commands.execute('notebook:run-all-cells').then(() => true);
      return Promise.race([run, new Promise(done => setTimeout(() => done(false), timeout_ms))]);
    }""",
        NOTEBOOK_TIMEOUT_S * 1000,
    )  # Run All's promise settles when the last cell has run (or one failed)
    state = page.evaluate(PROGRESS_JS)
    assert finished, f"{name}: still running after {NOTEBOOK_TIMEOUT_S} s: {state}"
    return state


def close_saved(page) -> None:
    """Save the notebook (a copy: an artefact with its outputs) and close it; a dialog would be a failure,
    so closing never waits for one."""
    page.evaluate("""async () => {
      const commands = window.jupyterapp.commands;
      await commands.execute('docmanager:save');
      await Promise.race([commands.execute('application:close'), new Promise(done => setTimeout(done, 10000))]);
    }""")
    dialogs = page.locator(".jp-Dialog")
    assert not dialogs.count(), f"a dialog is open: {dialogs.first.inner_text()[:200]}"


def rerun_builder(page, question: str, options: str) -> list[dict]:
    """05's builder as a participant uses it: type a question and options into the widgets and run
    the builder cell again; returns that cell's outputs."""
    notebook = page.locator(".jp-NotebookPanel:visible .jp-Notebook")
    notebook.locator(".widget-text input").first.fill(question)
    notebook.locator(".widget-textarea textarea").nth(1).fill(options)
    return json.loads(
        page.evaluate("""async () => {
      const panel = window.jupyterapp.shell.currentWidget;
      const index = panel.content.widgets.findIndex(
        c => c.model.sharedModel.getSource().includes('decide(steps.builder_request())'));
      panel.content.activeCellIndex = index;
      await window.jupyterapp.commands.execute('notebook:run-cell');  // resolves when the cell has run
      return JSON.stringify(panel.content.widgets[index].model.outputs.toJSON());
    }""")
    )


def check_builder(page, shots: Path) -> list[str]:
    """A mistake typed into the builder (one option) shows one line, not a traceback; typed values
    reach the kernel and redraw the chart."""
    found = []
    mistake = rerun_builder(page, "Is this about money?", "yes: Yes")
    errors = [o for o in mistake if o["output_type"] == "error"]
    shown = page.locator(".jp-NotebookPanel:visible .jp-OutputArea-output[data-mime-type*='stderr']")
    if len(errors) != 1 or len(errors[0]["traceback"]) != 1 or errors[0]["ename"] != "UnprocessableRequest":
        found.append(f"one option in the builder should show one line: {json.dumps(mistake)[:300]}")
    elif not shown.count() or len(shown.first.inner_text().strip().splitlines()) != 1:
        found.append(f"the builder's mistake is not shown as one line: {shown.all_inner_texts()}")
    else:
        shown.first.screenshot(path=str(shots / "05_invoke_decisions-mistake.png"))
    typed = rerun_builder(page, "Which colour does the customer mention?", "red: Red\ngreen: Green\nblue: Blue")
    text = "".join(o.get("data", {}).get("text/plain", "") for o in typed)
    if not all(f"  {colour} " in text for colour in ("red", "green", "blue")) or not any(
        "image/png" in o.get("data", {}) for o in typed
    ):
        found.append(f"the values typed into the builder did not reach the kernel: {json.dumps(typed)[:300]}")
    else:
        page.locator(".jp-NotebookPanel:visible .jp-OutputArea-output img").nth(4).screenshot(
            path=str(shots / "05_invoke_decisions-chart-typed.png")
        )
    return found


def problems_on_page(page, name: str) -> list[str]:
    """What a participant would see as broken, read from the rendered notebook."""
    notebook = page.locator(".jp-NotebookPanel:visible .jp-Notebook")
    found = []
    maths = notebook.locator(".jp-MarkdownCell mjx-container, .jp-MarkdownCell .MathJax, .jp-MarkdownCell .katex")
    if maths.count():
        cell = maths.first.evaluate("e => e.closest('.jp-MarkdownCell').textContent")
        found.append(f"{maths.count()} maths element(s) in markdown (a $...$ pair typeset?): {cell[:120]}")
    for text in notebook.locator(".jp-OutputArea-output").all_inner_texts():
        if "Traceback (most recent call last)" in text:
            found.append(f"a traceback: {text[:300]}")
        if text.lstrip().startswith(("Dropdown(", "Checkbox(", "Text(", "Textarea(", "VBox(", "IntSlider(")):
            found.append(f"a widget shown as text (no widget manager?): {text[:80]}")
    for label in notebook.locator(".jupyter-widgets label, .widget-label-basic").all():
        if label.is_visible() and label.evaluate("e => e.scrollWidth > e.clientWidth + 1"):
            found.append(f"a widget label is cut off: {label.inner_text()!r}")
    return found


def test_the_notebooks_in_jupyterlab_in_chromium(lab):
    from playwright.sync_api import sync_playwright

    started = time.monotonic()
    seconds: dict[str, float] = {}
    failures: list[str] = []
    shots = ARTEFACTS / "screenshots"
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=lab.chromium,
            headless=True,
            args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(f"{lab.url}/lab?token={lab.token}", timeout=180_000)
            page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=180_000)
            page.evaluate("async () => { await window.jupyterapp.started; }")
            for name in NOTEBOOKS:
                t = time.monotonic()
                state = run_all(page, name)
                seconds[name] = time.monotonic() - t
                page.screenshot(path=str(shots / f"{name}.png"))
                errors = state["errors"]
                not_run = [i for i, n in enumerate(state["counts"]) if n is None]
                failures += [f"{name}: {e}" for e in errors]
                if not_run:
                    failures.append(f"{name}: code cells {not_run} never ran (Run All stopped early)")
                failures += [f"{name}: {p}" for p in problems_on_page(page, name)]
                notebook = page.locator(".jp-NotebookPanel:visible .jp-Notebook")
                widgets = notebook.locator(".jp-OutputArea-output .jupyter-widgets")
                if name in ("00_setup", "05_invoke_decisions", "08_cleanup"):
                    if not widgets.count():
                        failures.append(f"{name}: no widget rendered")
                    else:
                        widgets.first.screenshot(path=str(shots / f"{name}-widgets.png"))
                if name == "05_invoke_decisions":
                    charts = notebook.locator(".jp-OutputArea-output img")
                    # the route, the shared-state answers, the two policies and the builder
                    if charts.count() < 5:
                        failures.append(f"{name}: {charts.count()} decision charts shown, expected 5")
                    for i in range(min(charts.count(), 5)):
                        charts.nth(i).screenshot(path=str(shots / f"{name}-chart-{i}.png"))
                    failures += [f"{name}: {p}" for p in check_builder(page, shots)]
                if name == "08_cleanup":
                    box = notebook.locator(".widget-checkbox")
                    if not box.count() or "decision-workshop" not in box.first.inner_text():
                        failures.append(f"{name}: the checkbox does not show the bucket it deletes")
                close_saved(page)
                lab.shutdown_kernels()
        finally:
            browser.close()
    timing = ", ".join(f"{n[:2]} {s:.0f} s" for n, s in seconds.items())
    print(f"\nbrowser run: {time.monotonic() - started:.0f} s ({timing}); screenshots in {shots}")
    assert not failures, "\n".join(failures)
    assert not rehearsal.default().status(), "08_cleanup left local processes running"
