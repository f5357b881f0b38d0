// The "local time" toggle in the footer: on request (kept in localStorage), every <time datetime> element is
// rewritten to the viewer's zone, its zone named; the page is served in UTC so it reads the same for everyone.
(function () {
  "use strict";
  var KEY = "wl-local-time";
  var button = document.getElementById("local-time-toggle");

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  function zoneName(date) {
    var part = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" }).formatToParts(date)
      .filter(function (p) { return p.type === "timeZoneName"; })[0];
    return part ? part.value : "local";
  }

  function localText(date) {
    return date.getFullYear() + "-" + pad(date.getMonth() + 1) + "-" + pad(date.getDate()) + " " +
      pad(date.getHours()) + ":" + pad(date.getMinutes()) + ":" + pad(date.getSeconds()) + " " + zoneName(date);
  }

  function apply(root) {
    var local = localStorage.getItem(KEY) === "1";
    (root || document).querySelectorAll("time[datetime]").forEach(function (el) {
      if (!el.dataset.utc) { el.dataset.utc = el.textContent; }
      var date = new Date(el.getAttribute("datetime"));
      if (isNaN(date.getTime())) { return; }
      el.textContent = local ? localText(date) : el.dataset.utc;
    });
    if (button) {
      button.setAttribute("aria-pressed", local ? "true" : "false");
      button.textContent = local ? "Show times in UTC" : "Show times in my local time";
    }
  }

  if (button) {
    button.addEventListener("click", function () {
      localStorage.setItem(KEY, localStorage.getItem(KEY) === "1" ? "0" : "1");
      apply();
    });
  }
  // Rows added by live updates carry their times in UTC too.
  new MutationObserver(function (changes) {
    if (localStorage.getItem(KEY) !== "1") { return; }
    changes.forEach(function (c) { c.addedNodes.forEach(function (n) { if (n.querySelectorAll) { apply(n); } }); });
  }).observe(document.body, { childList: true, subtree: true });
  apply();
}());
