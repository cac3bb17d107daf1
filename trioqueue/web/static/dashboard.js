// trioqueue dashboard: live updates from /api/events and ticking clocks. No build step.
(function () {
  "use strict";

  // A duration for people, as the server renders it (pages.py, _age).
  function age(seconds) {
    var s = Math.max(0, Math.floor(seconds));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
    return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  }

  // Countdowns (lease expiry) and ages (heartbeat, last beat) from the ISO times the
  // server put in data attributes, recomputed every second by the browser's clock. An
  // element that carries the database's now when the page was made (data-db-now) counts
  // on the database's clock instead: the times are the database's, and the browser's
  // clock may be off (docs/dashboard.rst, "Clocks").
  var loaded = Date.now();

  function clockNow(el, now) {
    var dbNow = el.getAttribute("data-db-now");
    return dbNow ? now + (Date.parse(dbNow) - loaded) : now;
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-countdown]").forEach(function (el) {
      var at = el.getAttribute("data-countdown");
      if (!at) { el.textContent = "–"; return; }
      var left = (Date.parse(at) - clockNow(el, now)) / 1000;
      el.textContent = left > 0 ? age(left) : "expired " + age(-left) + " ago";
      el.classList.toggle("error", left <= 0);
    });
    document.querySelectorAll("[data-age]").forEach(function (el) {
      var at = el.getAttribute("data-age");
      el.textContent = at ? age((clockNow(el, now) - Date.parse(at)) / 1000) + " ago" : "–";
    });
  }

  function setProgress(bar, value) {
    var pct = value === null || value === undefined ? null : Math.round(value * 1000) / 10;
    var fill = bar.querySelector(".fill");
    var label = bar.querySelector("[data-testid=progress-value]");
    if (pct === null) {
      bar.removeAttribute("aria-valuenow");
      if (fill) fill.style.width = "0%";
      if (label) label.textContent = "–";
    } else {
      bar.setAttribute("aria-valuenow", String(pct));
      if (fill) fill.style.width = pct + "%";
      if (label) label.textContent = pct + "%";
    }
  }

  // The server puts a bar's width in data-fill (a style attribute would break the page's
  // Content-Security-Policy); styles set from a script are allowed.
  function fillBars() {
    document.querySelectorAll(".progress .fill[data-fill]").forEach(function (fill) {
      fill.style.width = fill.getAttribute("data-fill") + "%";
    });
  }

  function setStatus(el, status) {
    el.textContent = status;
    el.className = "status " + status;
  }

  function onJob(data) {
    var page = document.body.getAttribute("data-page");
    if (page === "job") {
      var status = document.getElementById("job-status");
      if (!status || Number(status.getAttribute("data-job-id")) !== data.id) return;
      var before = status.textContent;
      setStatus(status, data.status);
      var bar = document.querySelector("#job-progress [data-testid=progress-bar]");
      if (bar) setProgress(bar, data.progress);
      // Each renewal moves the lease on: count down to the new expiry from now on.
      var countdown = document.getElementById("lease-countdown");
      if (countdown && data.status === before) countdown.setAttribute("data-countdown", data.lease_expires_at || "");
      var heartbeat = document.getElementById("heartbeat-age");
      if (heartbeat && data.status === before) heartbeat.setAttribute("data-age", data.last_renewed_at || "");
      tick();
      // A new state changes the lease, the error and the actions: read the page again.
      if (before !== data.status && data.status !== "deleted") window.location.reload();
      return;
    }
    var row = document.querySelector('tr[data-job-id="' + data.id + '"]');
    if (!row) return;
    var cell = row.querySelector("[data-testid=job-status]");
    if (cell) setStatus(cell, data.status);
    var rowBar = row.querySelector("[data-testid=progress-bar]");
    if (rowBar) setProgress(rowBar, data.progress);
  }

  // The row of a queue, found by the name in its data-queue-json: JSON, because HTML
  // reads a CR in an attribute as a LF, so data-queue can hold another name than the
  // event's; a row never found made every queue event reload the page, for ever.
  function queueRow(name) {
    var rows = document.querySelectorAll("tr[data-testid=queue-row]");
    for (var i = 0; i < rows.length; i++) {
      if (JSON.parse(rows[i].getAttribute("data-queue-json")) === name) return rows[i];
    }
    return null;
  }

  // An estimated count as the page renders it (trioqueue/web/counts.py): "~1.2M".
  function countText(n, estimated) {
    if (!estimated) return String(n);
    var units = [[1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (var i = 0; i < units.length; i++) {
      if (n >= units[i][0]) {
        var scaled = n / units[i][0];
        var shown = scaled < 10 ? scaled.toFixed(1) : scaled.toFixed(0);
        return "~" + shown.replace(/\.0$/, "") + units[i][1];
      }
    }
    return "~" + n;
  }

  function onQueue(data) {
    // Only the overview shows queue counts; elsewhere a queue event would reload the page.
    if (document.body.getAttribute("data-page") !== "overview") return;
    var row = queueRow(data.queue);
    if (!row) {
      // A queue appeared or vanished: the table's shape changed, render it again.
      if (Object.keys(data.counts).length) window.location.reload();
      return;
    }
    row.querySelectorAll("[data-testid=queue-count]").forEach(function (el) {
      var status = el.getAttribute("data-status");
      var estimated = data.estimated && (status === "succeeded" || status === "failed");
      el.setAttribute("data-estimated", estimated ? "true" : "false");
      el.textContent = countText(data.counts[status] || 0, estimated);
    });
    var oldest = row.querySelector("[data-testid=oldest-ready-age]");
    if (oldest) oldest.textContent = data.oldest_ready_age === null ? "–" : age(data.oldest_ready_age);
    // Paused or limited elsewhere (the CLI, another tab): the row's buttons change too.
    // Compared as numbers: the page writes 10.0 where the JSON's 10.0 reads as 10.
    function num(text) { return text === null || text === "" ? null : Number(text); }
    function limit(value) { return value === null || value === undefined ? null : value; }
    if (row.getAttribute("data-paused") !== String(data.paused) ||
        num(row.getAttribute("data-max-running")) !== limit(data.max_running) ||
        num(row.getAttribute("data-max-per-second")) !== limit(data.max_per_second)) {
      window.location.reload();
    }
  }

  // Pause and Resume post to the JSON API (/api/queues/{queue}/pause); without JavaScript
  // the same buttons post their form to /queues/actions.
  function queueActions() {
    document.querySelectorAll("form.queue-action").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        var button = event.submitter || form.querySelector("button[name=action]");
        var confirmText = button.getAttribute("data-confirm");
        if (confirmText && !window.confirm(confirmText)) return;
        var queue = form.querySelector("input[name=queue]").value;
        var shown = form.querySelector("[data-testid=queue-action-error]");
        // The form's own action names the site's root: under a prefix (one dashboard over
        // several databases, /db/NAME/queues/actions) the API is under it too.
        var root = (form.getAttribute("action") || "").replace(/\/queues\/actions$/, "");
        var url = root + "/api/queues/" + encodeURIComponent(queue) + "/" + button.value;
        fetch(url, { method: "POST", credentials: "same-origin", headers: { "Accept": "application/json" } })
          .then(function (response) {
            if (response.ok) { window.location.reload(); return null; }
            return response.json().then(function (body) { shown.textContent = body.error || response.statusText; });
          })
          .catch(function (err) { shown.textContent = String(err); });
      });
    });
  }

  function listen() {
    var url = document.body.getAttribute("data-events");
    var live = document.getElementById("live-status");
    if (!url || !window.EventSource) { if (live) live.textContent = ""; return; }
    var source = new EventSource(url);
    source.addEventListener("open", function () { live.textContent = "live"; live.className = "live on"; });
    source.addEventListener("error", function () { live.textContent = "reconnecting"; live.className = "live off"; });
    source.addEventListener("job", function (e) { onJob(JSON.parse(e.data)); });
    source.addEventListener("queue", function (e) { onQueue(JSON.parse(e.data)); });
    window.addEventListener("pagehide", function () { source.close(); });
  }

  function selectAll() {
    var all = document.getElementById("select-all");
    if (!all) return;
    all.addEventListener("change", function () {
      document.querySelectorAll("[data-testid=job-select]").forEach(function (box) { box.checked = all.checked; });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    fillBars();
    tick();
    setInterval(tick, 1000);
    selectAll();
    queueActions();
    listen();
  });
})();
