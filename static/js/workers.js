// Worker cards: re-fetch the server-rendered cards every few seconds and swap them in, so the
// workers page and the cards beside a leaderboard stay live without reloading the page.
(function () {
  "use strict";
  var PERIOD_MS = 5000;
  function refresh(section) {
    fetch(section.dataset.url, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.querySelector("[data-worker-cards]");
        if (fresh) section.replaceWith(fresh);
        schedule(fresh || section, PERIOD_MS);
      })
      .catch(function () { schedule(section, PERIOD_MS * 3); });
  }
  function schedule(section, delay) {
    setTimeout(function () { if (!document.hidden) refresh(section); else schedule(section, delay); }, delay);
  }
  // The queue figures on the workers page come from /api/queue/ on the same beat.
  function refreshQueue(facts) {
    fetch(facts.dataset.queueUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (q) {
        facts.querySelectorAll("[data-queue]").forEach(function (el) {
          var v = q[el.dataset.queue];
          el.textContent = v === null || v === undefined ? "–" : v;
        });
      })
      .catch(function () {})
      .then(function () { setTimeout(function () { refreshQueue(facts); }, PERIOD_MS); });
  }
  if (window.__workerCardsStarted) return;
  window.__workerCardsStarted = true;
  document.querySelectorAll("[data-worker-cards]").forEach(function (s) { schedule(s, PERIOD_MS); });
  var facts = document.querySelector("[data-queue-url]");
  if (facts) setTimeout(function () { refreshQueue(facts); }, PERIOD_MS);
})();
