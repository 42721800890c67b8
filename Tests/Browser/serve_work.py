"""Starting and landing work from the page of `agent-sessions serve`, in a real headless
Chromium at a phone's size: a new task, another agent in it, its port as a link, commit,
pull request and merge of a task made beforehand, and several attempts compared with a
check and one kept.

Run by ServeTests. Each step prints one JSON line ({"step": ..., ...}); a screenshot of
each page is kept in --out. The script does what a user does and reports what the page
showed; the test decides what is right.
"""
import argparse
import http.server
import os
import re
import socketserver
import sys
import threading

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from serve_page import console, phone, say, wait_for


class TaskPortPage(http.server.BaseHTTPRequestHandler):
    """What a dev server in the task's worktree would answer on its PORT."""

    def do_GET(self):
        body = b"<!doctype html><title>dev server</title><p id=hello>hello from the task's port</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--code", required=True)
    ap.add_argument("--land", required=True, help="the title of a task with a change to commit and merge")
    ap.add_argument("--out", required=True)
    ap.add_argument("--width", type=int, default=390)
    ap.add_argument("--height", type=int, default=844)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    driver = phone(a.out, a.width, a.height)
    dev = None
    script = "return app.screenText ? app.screenText() : ''"

    def message():
        return wait_for(lambda: (lambda t: t if t and not t.endswith("…") else None)(
            driver.find_element(By.ID, "message").text), 90)

    def choose(select, value):
        # the options are filled in from a request: chosen once they are there
        return wait_for(lambda: Select(driver.find_element(By.ID, select)).select_by_value(value) or True, 20)

    def bad():
        return "bad" in driver.find_element(By.ID, "message").get_attribute("class")

    def act(name):
        driver.execute_script("document.getElementById('message').textContent = ''")
        driver.find_element(By.CSS_SELECTOR, "[data-action=%s]" % name).click()
        return message()

    try:
        driver.get(a.url + "/pair#code=" + a.code)
        driver.find_element(By.ID, "name").send_keys("work phone")
        driver.find_element(By.CSS_SELECTOR, "#pair button").click()
        wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#board a.row"))

        # a new task from the board
        driver.find_element(By.ID, "new-task").click()
        agents = wait_for(lambda: [o.get_attribute("value") for o in
                                   driver.find_elements(By.CSS_SELECTOR, "#agent option")] or None)
        projects = [o.text for o in driver.find_elements(By.CSS_SELECTOR, "#project option")]
        driver.find_element(By.ID, "title").send_keys("Started from the phone")
        choose("agent", "amp")
        driver.find_element(By.ID, "prompt").send_keys("hello from the phone")
        driver.save_screenshot(os.path.join(a.out, "new.png"))
        driver.find_element(By.CSS_SELECTOR, "#new button").click()
        wait_for(lambda: "/t/" in driver.current_url)
        screen = wait_for(lambda: (lambda t: t if "got: hello from the phone" in t else None)(driver.execute_script(script)), 40)
        say("new", projects=projects, agents=agents, url=driver.current_url, screen=screen,
            meta=driver.find_element(By.ID, "meta").text, console=console(driver))
        driver.save_screenshot(os.path.join(a.out, "new-task.png"))

        # another agent in its worktree
        driver.find_element(By.ID, "add-chat").click()
        wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#chat-agent option"))
        choose("chat-agent", "amp")
        driver.find_element(By.ID, "chat-prompt").send_keys("a second opinion")
        driver.find_element(By.CSS_SELECTOR, "#chat-form button").click()
        second = wait_for(lambda: (lambda t: t if "got: a second opinion" in t else None)(driver.execute_script(script)), 40)
        # the agents' buttons are drawn afresh as the task is read again: read them whole
        agents = wait_for(lambda: (lambda b: b if len(b) == 2 else None)(
            [b.text for b in driver.find_elements(By.CSS_SELECTOR, "#agents button")]), 20)
        say("chat", message=driver.find_element(By.ID, "message").text, screen=second, agents=agents,
            console=console(driver))

        # its port: a dev server on PORT, reached through the link the page gives
        meta = driver.find_element(By.ID, "meta").text
        m = re.search(r"PORT (\d+)", meta)
        if m:
            socketserver.TCPServer.allow_reuse_address = True
            dev = socketserver.TCPServer(("127.0.0.1", int(m.group(1))), TaskPortPage)
            threading.Thread(target=dev.serve_forever, daemon=True).start()
        driver.find_element(By.ID, "open-port").click()
        link = wait_for(lambda: driver.find_element(By.CSS_SELECTOR, "#link a"), 30)
        href = link.get_attribute("href") if link else None
        fields = dict(message=driver.find_element(By.ID, "message").text, port=m.group(1) if m else None, href=href,
                      rel=link.get_attribute("rel") if link else None)
        driver.save_screenshot(os.path.join(a.out, "port.png"))
        if href:
            driver.get(href)
            fields["page"] = wait_for(lambda: driver.find_element(By.ID, "hello").text, 20)
        say("port", **fields)

        # landing a task made beforehand: commit, a pull request, merge
        driver.get(a.url + "/")
        # the board is drawn afresh as it changes: the row found and clicked in one go
        wait_for(lambda: [r for r in driver.find_elements(By.CSS_SELECTOR, "#board a.row") if a.land in r.text][0].click()
                 or True)
        wait_for(lambda: "/t/" in driver.current_url and driver.find_element(By.ID, "title").text == a.land)
        say("commit", message=act("commit"), bad=bad())
        say("pr", message=act("pr"), bad=bad())
        say("merge", message=act("merge"), bad=bad())
        say("merge again", message=act("merge"), bad=bad())
        driver.save_screenshot(os.path.join(a.out, "landed.png"))

        # several attempts at one work, compared with a check in each, one kept
        driver.get(a.url + "/new")
        wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#agent option"))
        driver.find_element(By.ID, "title").send_keys("Two ways")
        choose("agent", "amp")
        driver.find_element(By.ID, "prompt").send_keys("try it")
        attempts = driver.find_element(By.ID, "attempts")
        attempts.clear()
        attempts.send_keys("2")
        driver.find_element(By.CSS_SELECTOR, "#new button").click()
        wait_for(lambda: "/t/" in driver.current_url)
        rows = wait_for(lambda: (lambda r: r if len(r) == 2 else None)(
            driver.find_elements(By.CSS_SELECTOR, "#attempt-rows .attempt")), 40)
        labels = [r.get_attribute("data-attempt") for r in rows or []]
        driver.find_element(By.ID, "check-command").send_keys("test -f .git && echo checked here")
        driver.find_element(By.CSS_SELECTOR, "#check button").click()
        checked = wait_for(lambda: (lambda t: t if "passed" in t and "of" in t else None)(
            driver.find_element(By.ID, "message").text), 90)
        passes = [r.find_element(By.CSS_SELECTOR, ".pass").text
                  for r in driver.find_elements(By.CSS_SELECTOR, "#attempt-rows .attempt")
                  if r.find_elements(By.CSS_SELECTOR, ".pass")]
        driver.save_screenshot(os.path.join(a.out, "attempts.png"))
        first = driver.current_url
        keep = [r for r in driver.find_elements(By.CSS_SELECTOR, "#attempt-rows .attempt")
                if r.get_attribute("data-attempt") == (labels[1] if len(labels) > 1 else None)]
        kept = None
        if keep:
            keep[0].find_element(By.XPATH, ".//button[text()='Keep this one']").click()
            driver.switch_to.alert.accept()
            wait_for(lambda: driver.current_url != first, 60)
            kept = driver.current_url
        archived = wait_for(lambda: [r.get_attribute("data-attempt") for r in
                                     driver.find_elements(By.CSS_SELECTOR, "#attempt-rows .attempt")
                                     if "archived" in r.text] or None, 30)
        say("attempts", labels=labels, checked=checked, passes=passes, first=first, kept=kept, archived=archived,
            width=driver.execute_script("return document.documentElement.scrollWidth"), console=console(driver))
        driver.save_screenshot(os.path.join(a.out, "picked.png"))
    except Exception as e:
        say("error", error=repr(e), console=console(driver))
        driver.save_screenshot(os.path.join(a.out, "error.png"))
    finally:
        driver.quit()
        if dev:
            dev.shutdown()
            dev.server_close()


if __name__ == "__main__":
    sys.exit(main())
