// Submission page: ask the API while the evaluation runs (each answer held up to a second until
// the submission is final, ?wait=1), move the progress bar and the place in the queue, and reload
// once the submission reaches a final state so the server renders the result or the error.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || live.dataset.final === "1") return;
  var bar = document.getElementById("progress");
  var text = live.querySelector("[data-progress-text]");
  var chip = document.querySelector("[data-status]");
  var place = document.querySelector("[data-queue-position]");
  var FINAL = ["succeeded", "failed", "cancelled"];
  function setText(selector, value) {
    var node = place.querySelector(selector);
    if (node && value !== null && value !== undefined) node.textContent = value;
  }
  function showPlace(queue) {
    if (!place) return;
    place.hidden = !queue;  // started (or no longer queued): no place to show
    if (!queue) return;
    setText("[data-queue-number]", queue.position);
    // One of two sentences holds: no worker of the class is online, or one is and the class has
    // run something lately (an estimate); neither while a worker is online but nothing has run.
    show("[data-waiting-for-device]", queue.waiting_for_device);
    show("[data-estimated-start]", !queue.waiting_for_device && !!queue.estimated_start);
    if (queue.estimated_wait_s !== null) setText("[data-wait-s]", Math.round(queue.estimated_wait_s));
    // The API's times are UTC ISO 8601 (TIME_ZONE = "UTC"), as the page's "UTC" label says.
    if (queue.estimated_start) setText("[data-start-time]", queue.estimated_start.slice(11, 16));
  }
  function show(selector, visible) {
    var node = place.querySelector(selector);
    if (node) node.hidden = !visible;
  }
  var PERIOD_MS = 1000;
  function tick() {
    var began = Date.now();
    fetch(live.dataset.api + "?wait=" + PERIOD_MS / 1000,
          { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (s) {
        if (bar) bar.value = s.progress;
        if (text) text.textContent = Math.round(s.progress * 100) + "%";
        if (chip) { chip.textContent = s.status; chip.className = "chip chip-" + s.status; }
        showPlace(s.queue);
        if (FINAL.indexOf(s.status) >= 0) { window.location.reload(); return; }
        setTimeout(tick, Math.max(0, PERIOD_MS - (Date.now() - began)));  // once a period
      })
      .catch(function () { setTimeout(tick, 5000); });
  }
  setTimeout(tick, 500);
})();
