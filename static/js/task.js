// Task page: show one tab at a time (the page works without this as a list of anchored
// sections), follow the address's #fragment, and count down to the timeline's future dates.
(function () {
  "use strict";
  var root = document.querySelector("[data-task-tabs]");
  if (!root) return;
  var links = root.querySelectorAll("[data-tab]");
  var panels = root.querySelectorAll("[data-panel]");

  function show(name) {
    var found = false;
    panels.forEach(function (p) { if (p.dataset.panel === name) found = true; });
    if (!found) name = "overview";
    panels.forEach(function (p) { p.hidden = p.dataset.panel !== name; });
    links.forEach(function (a) {
      if (a.dataset.tab === name) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    });
  }
  links.forEach(function (a) {
    a.addEventListener("click", function (event) {
      event.preventDefault();
      history.replaceState(null, "", "#" + a.dataset.tab);
      show(a.dataset.tab);
    });
  });
  window.addEventListener("hashchange", function () { show(location.hash.slice(1)); });
  show(location.hash.slice(1));

  function left(ms) {
    var s = Math.floor(ms / 1000), d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600);
    var m = Math.floor(s % 3600 / 60);
    if (d > 0) return "in " + d + " d " + h + " h " + m + " min " + (s % 60) + " s";
    if (h > 0) return "in " + h + " h " + m + " min " + (s % 60) + " s";
    return "in " + m + " min " + (s % 60) + " s";
  }
  var counters = root.querySelectorAll("[data-countdown]");
  function tick() {
    var now = Date.now();
    counters.forEach(function (c) {
      var ms = Date.parse(c.dataset.countdown) - now;
      c.textContent = ms > 0 ? left(ms) : "now";
    });
  }
  if (counters.length) { tick(); setInterval(tick, 1000); }
})();

// The queue an upload made now would join: its class's waiting and running counts, the
// machines online and the estimated start, from the queue API (GET /api/queue/).
(function () {
  "use strict";
  var box = document.querySelector("[data-task-queue]");
  if (!box || !window.fetch) return;
  var counts = box.querySelector("[data-queue-counts]");
  var start = box.querySelector("[data-queue-start]");

  // The same rule as evaluation.formats.duration: seconds below 90 s, then minutes, then hours.
  function duration(s) {
    s = Math.round(s);
    if (s < 90) return s + " s";
    var m = Math.round(s / 60);
    return m < 90 ? m + " min" : Math.floor(m / 60) + " h " + (m % 60) + " min";
  }
  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }

  function show(c) {
    var parts = [c.queued + " waiting", c.running + " running"];
    if (c.workers_online !== null) parts.push(plural(c.workers_online, "machine") + " online");
    counts.textContent = c.name + " machines: " + parts.join(" · ") + ".";
    counts.dataset.queued = c.queued;
    if (c.workers_online === 0) {
      start.textContent = "No evaluation machine of this class is online: an upload now waits " +
        "until one comes back, and does not count against your quota until it starts.";
    } else if (c.estimated_wait_s_next !== null) {
      start.textContent = c.estimated_wait_s_next < 1 ? "An upload now would start at once." :
        "An upload now would start in about " + duration(c.estimated_wait_s_next) + ".";
    } else {
      start.textContent = "";
    }
  }
  function load() {
    fetch(box.dataset.url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (q) {
        var found = q && q.device_classes.filter(function (c) {
          return c.slug === box.dataset.deviceClass;
        })[0];
        if (found) show(found);
      })
      .catch(function () { /* the link to the queue page stays */ });
  }
  load();
  setInterval(function () { if (!document.hidden) load(); }, 15000);
})();
