// The dashboard's own script: live updates over server-sent events, the filter form, and the
// confirmation in front of every action. The server renders everything; this only swaps the
// parts it sends, asks before posting, and says what happened.
"use strict";

(() => {
  const body = document.body;
  const banner = document.getElementById("connection");

  // ---- live updates ----
  const stream = body.dataset.stream;
  let source = null;
  function connect() {
    if (!stream) {
      return;
    }
    source = new EventSource(stream + window.location.search);
    source.addEventListener("hello", (event) => {
      // Another dashboard process than the one that served this page: its token and view
      // are stale, so start again from a fresh page.
      if (body.dataset.instance && body.dataset.instance !== event.data) {
        window.location.reload();
        return;
      }
      body.dataset.instance = event.data;
    });
    source.addEventListener("open", () => {
      banner.hidden = true;
      body.classList.remove("offline");
    });
    source.addEventListener("update", (event) => {
      const parts = JSON.parse(event.data);
      for (const [id, html] of Object.entries(parts)) {
        const element = document.getElementById(id);
        if (element) {
          element.innerHTML = html;
        }
      }
      body.dataset.updates = String(Number(body.dataset.updates || "0") + 1);
    });
    source.addEventListener("gone", (event) => {
      // The tenant no longer exists: say so and stop.
      banner.textContent = event.data;
      banner.hidden = false;
      source.close();
    });
    source.addEventListener("error", () => {
      banner.hidden = false;
      body.classList.add("offline");
      // The browser retries a dropped stream by itself; one the server refused is closed,
      // and retried here.
      if (source.readyState === EventSource.CLOSED) {
        window.setTimeout(connect, 2000);
      }
    });
  }
  connect();
  // A browser keeps few connections per server (six over HTTP/1.1), and a page it keeps for
  // "back" would hold its stream open: close it when the page goes, reopen it if it comes back.
  window.addEventListener("pagehide", () => {
    if (source) {
      source.close();
    }
  });
  window.addEventListener("pageshow", (event) => {
    if (event.persisted) {
      connect();
    }
  });

  // ---- filter ----
  const filter = document.getElementById("filter");
  if (filter) {
    filter.addEventListener("change", () => filter.submit());
  }

  // ---- actions ----
  // One dashboard's page token, or (across DCs) each button's own, bound to its DC, tenant
  // and action.
  const token = document.querySelector('meta[name="express-token"]');
  const dialog = document.getElementById("confirm");
  const result = document.getElementById("result");
  if (!dialog) {
    return;
  }
  const option = document.getElementById("confirm-option");
  const check = document.getElementById("confirm-check");
  let pending = null;

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button.action");
    if (!button) {
      return;
    }
    pending = button;
    document.getElementById("confirm-title").textContent = button.dataset.title;
    document.getElementById("confirm-text").textContent = button.dataset.confirm;
    option.hidden = !button.dataset.option;
    check.checked = false;
    document.getElementById("confirm-option-text").textContent = button.dataset.optionText || "";
    // Closing with Escape keeps the last returnValue: without this, an earlier confirmation
    // would confirm this one.
    dialog.returnValue = "";
    dialog.showModal();
  });

  function say(text, kind) {
    result.textContent = text;
    result.className = "result " + kind;
    result.hidden = false;
  }

  dialog.addEventListener("close", async () => {
    const button = pending;
    pending = null;
    if (!button || dialog.returnValue !== "ok") {
      return;
    }
    const request = JSON.parse(button.dataset.body || "{}");
    if (button.dataset.option) {
      request[button.dataset.option] = check.checked;
    }
    say(button.dataset.title + "…", "pending");
    try {
      const response = await fetch(button.dataset.url, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Express-Token": button.dataset.token || (token ? token.content : "") },
        body: JSON.stringify(request),
      });
      const answer = await response.json();
      if (response.ok) {
        say(answer.message + (answer.warning ? "\nwarning: " + answer.warning : ""), answer.warning ? "warning" : "ok");
      } else {
        say(answer.error || response.statusText, "error");
      }
    } catch (error) {
      say("The request did not reach the dashboard: " + error, "error");
    }
  });
})();
