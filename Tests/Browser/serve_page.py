"""The page of `agent-sessions serve` in a real headless Chromium at a phone's size.

Run by ServeTests with the server's address, a fresh pairing code and the task to open.
Each step prints one JSON line ({"step": ..., ...}); a screenshot of each page is kept in
--out. The script does what a user does and reports what the page showed; the test
decides what is right.
"""
import argparse
import json
import os
import sys
import time

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.chrome.service import Service


def say(step, **fields):
    fields["step"] = step
    print(json.dumps(fields), flush=True)


def wait_for(what, seconds=30.0, every=0.2):
    end = time.time() + seconds
    last = None
    while time.time() < end:
        try:
            last = what()
            if last:
                return last
        except Exception as e:  # the page may be between two states
            last = None
        time.sleep(every)
    return last


def console(driver):
    """The page's console errors and warnings so far."""
    try:
        return [e["message"][:300] for e in driver.get_log("browser") if e.get("level") in ("SEVERE", "WARNING")]
    except Exception:
        return []


def phone(out, width, height):
    """Headless Chromium as a phone of that size, its profile and console log kept."""
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=%d,%d" % (width, height), "--user-data-dir=" + os.path.join(out, "profile")):
        options.add_argument(arg)
    options.add_experimental_option("mobileEmulation", {
        "deviceMetrics": {"width": width, "height": height, "pixelRatio": 2.0, "touch": False}})
    options.binary_location = "/usr/bin/chromium"
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    driver.set_page_load_timeout(30)
    return driver


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--code", required=True)
    ap.add_argument("--title", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--width", type=int, default=390)
    ap.add_argument("--height", type=int, default=844)
    ap.add_argument("--board-only", action="store_true", help="pair and show the board, then stop")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    driver = phone(a.out, a.width, a.height)
    try:
        # an unpaired device gets nowhere
        driver.get(a.url + "/")
        say("unpaired", body=driver.find_element(By.TAG_NAME, "body").text[:300])

        # pairing, with the code the QR code's link carries
        driver.get(a.url + "/pair#code=" + a.code)
        driver.find_element(By.ID, "name").send_keys("test phone")
        driver.save_screenshot(os.path.join(a.out, "pair.png"))
        driver.find_element(By.CSS_SELECTOR, "#pair button").click()
        rows = wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#board a.row"))
        cookies = driver.get_cookies()
        say("paired", url=driver.current_url, rows=len(rows or []),
            cookie=[{k: c.get(k) for k in ("name", "httpOnly", "sameSite", "secure")} for c in cookies])

        # the board, live: the task's row, its title as text
        # (its text read where it is found: the board is drawn afresh as it changes)
        row = wait_for(lambda: [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#board a.row")
                                if a.title in r.text])
        driver.save_screenshot(os.path.join(a.out, "board.png"))
        scripts = len(driver.find_elements(By.TAG_NAME, "script"))
        say("board", found=bool(row), text=row[0] if row else None, scripts=scripts,
            injected=driver.execute_script("return window.__injected === true"),
            live=wait_for(lambda: "on" in driver.find_element(By.ID, "live").get_attribute("class"), 10))

        if a.board_only:
            return 0

        # the task: its terminal shows the agent's screen (the board is drawn afresh as it
        # changes: the row found and clicked in one go)
        wait_for(lambda: [r for r in driver.find_elements(By.CSS_SELECTOR, "#board a.row") if a.title in r.text][0].click()
                 or True)
        wait_for(lambda: "/t/" in driver.current_url)
        screen = wait_for(lambda: (driver.execute_script("return app.screenText ? app.screenText() : ''") or "")
                          if "got: hello" in (driver.execute_script("return app.screenText ? app.screenText() : ''") or "")
                          else None)
        say("task", title=driver.find_element(By.ID, "title").text, screen=screen, console=console(driver),
            width=driver.execute_script("return document.documentElement.scrollWidth"))
        driver.save_screenshot(os.path.join(a.out, "task.png"))

        # keystrokes into the agent's terminal come back through tmux
        term = driver.find_element(By.CSS_SELECTOR, "#terminal .xterm")
        term.click()
        # (printable keys go out from their keydown, named keys through xterm.js: both, in order)
        ActionChains(driver).send_keys("Typed in thx" + Keys.BACKSPACE + "e browser" + Keys.ENTER).perform()
        typed = wait_for(lambda: "got: Typed in the browser" in driver.execute_script("return app.screenText()"))
        say("typed", echoed=bool(typed), screen=driver.execute_script("return app.screenText()")[-400:])
        # what the page drew is the screen: each row's text is the terminal's line, spaces kept,
        # from far fewer elements than cells (a run of like cells is one span)
        time.sleep(0.3)
        say("drawn", **driver.execute_script("""
            var rows = Array.prototype.map.call(document.querySelectorAll('#terminal .xterm-rows > div'),
                function (r) { return r.textContent.replace(/\\s+$/, ''); });
            var lines = app.screenText().split('\\n');
            lines = lines.slice(lines.length - rows.length).map(function (l) { return l.replace(/\\s+$/, ''); });
            return { same: rows.join('\\n') === lines.join('\\n'), rows: rows.length,
                     spans: document.querySelectorAll('#terminal .xterm-rows span').length,
                     drawn: rows.filter(Boolean).slice(-4), lines: lines.filter(Boolean).slice(-4) };"""))

        # a line through the form
        driver.find_element(By.ID, "line").send_keys("sent from the form")
        driver.find_element(By.CSS_SELECTOR, "#send button").click()
        sent = wait_for(lambda: "got: sent from the form" in driver.execute_script("return app.screenText()"))
        say("sent", echoed=bool(sent), message=driver.find_element(By.ID, "message").text)

        # a question, with a button per answer its screen offers
        driver.find_element(By.ID, "line").send_keys("Continue? (y/n)")
        driver.find_element(By.CSS_SELECTOR, "#send button").click()
        buttons = wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#question .answers button"), 40)
        labels = [b.text for b in buttons or []]
        driver.save_screenshot(os.path.join(a.out, "question.png"))
        yes = [b for b in buttons or [] if b.text == "Yes"]
        if yes:
            yes[0].click()
        answered = wait_for(lambda: "got: y\n" in driver.execute_script("return app.screenText()"), 30)
        say("question", labels=labels, answered=bool(answered), message=driver.find_element(By.ID, "message").text)

        # the diff, one file opened
        driver.find_element(By.ID, "show-diff").click()
        files = wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#diff details"))
        patch = None
        if files:
            files[0].find_element(By.TAG_NAME, "summary").click()
            patch = wait_for(lambda: files[0].find_element(By.TAG_NAME, "pre").text)
        driver.save_screenshot(os.path.join(a.out, "diff.png"))
        say("diff", files=[f.find_element(By.TAG_NAME, "summary").text for f in files or []], patch=patch)

        def act(name):
            driver.find_element(By.CSS_SELECTOR, "[data-action=%s]" % name).click()
            return wait_for(lambda: (lambda t: t if t and not t.endswith("…") else None)(
                driver.find_element(By.ID, "message").text), 60)

        say("commit", message=act("commit"))
        say("push", message=act("push"),
            bad="bad" in driver.find_element(By.ID, "message").get_attribute("class"))
        say("stop", message=act("stop"),
            agents=wait_for(lambda: (lambda t: t if "stopped" in t else None)(
                driver.find_element(By.ID, "agents").text), 15))
        say("resume", message=act("resume"),
            screen=wait_for(lambda: (lambda t: t if "READY>" in t else None)(
                driver.execute_script("return app.screenText()")), 30))
        driver.save_screenshot(os.path.join(a.out, "resumed.png"))
    except Exception as e:
        say("error", error=repr(e), console=console(driver))
        driver.save_screenshot(os.path.join(a.out, "error.png"))
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
