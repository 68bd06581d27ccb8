// Submission page: poll the API while the evaluation runs, move the progress bar and the place
// in the queue, and reload once the submission reaches a final state so the server renders the
// result or the error.
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
    if (queue.estimated_wait_s !== null) setText("[data-wait-s]", Math.round(queue.estimated_wait_s));
    if (queue.estimated_start) setText("[data-start-time]", queue.estimated_start.slice(11, 16));
  }
  function tick() {
    fetch(live.dataset.api, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (s) {
        if (bar) bar.value = s.progress;
        if (text) text.textContent = Math.round(s.progress * 100) + "%";
        if (chip) { chip.textContent = s.status; chip.className = "chip chip-" + s.status; }
        showPlace(s.queue);
        if (FINAL.indexOf(s.status) >= 0) { window.location.reload(); return; }
        setTimeout(tick, 1000);
      })
      .catch(function () { setTimeout(tick, 5000); });
  }
  setTimeout(tick, 500);
})();
