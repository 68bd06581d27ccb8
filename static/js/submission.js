// Submission page: poll the API while the evaluation runs, move the progress bar, and reload
// once the submission reaches a final state so the server renders the result or the error.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || live.dataset.final === "1") return;
  var bar = document.getElementById("progress");
  var text = live.querySelector("[data-progress-text]");
  var chip = document.querySelector("[data-status]");
  var FINAL = ["succeeded", "failed", "cancelled"];
  function tick() {
    fetch(live.dataset.api, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (s) {
        if (bar) bar.value = s.progress;
        if (text) text.textContent = Math.round(s.progress * 100) + "%";
        if (chip) { chip.textContent = s.status; chip.className = "chip chip-" + s.status; }
        if (FINAL.indexOf(s.status) >= 0) { window.location.reload(); return; }
        setTimeout(tick, 1000);
      })
      .catch(function () { setTimeout(tick, 5000); });
  }
  setTimeout(tick, 500);
})();
