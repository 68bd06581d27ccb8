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
