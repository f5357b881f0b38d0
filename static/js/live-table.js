/* Keep a server-rendered table current without a reload: on any live frame of the
 * page's projects, fetch the same URL again and swap the table's body in place.
 *
 *   <div id="T" data-live-projects='["slug", ...]'> (the table, or the "nothing here" line) </div>
 *
 * Every such element on the page is started when this script loads (no inline
 * script: the Content-Security-Policy allows none); WL.liveTable("T") starts one.
 *
 * The swap waits while someone is typing in or has opened a form inside it,
 * so a half-written verdict note or mute reason is never thrown away.
 */
(function () {
  "use strict";
  function busy(table) {
    const active = document.activeElement;
    return (active && table.contains(active) && /INPUT|TEXTAREA|SELECT/.test(active.tagName)) || table.querySelector("details[open]");
  }
  window.WL = window.WL || {};
  WL.liveTable = function (id) {
    const table = document.getElementById(id);
    if (!table || !WL.live) return;
    let timer = null;
    async function refresh() {
      if (busy(table)) { timer = setTimeout(refresh, 2000); return; }
      const response = await fetch(window.location.href, { credentials: "same-origin" });
      if (!response.ok) return;
      const doc = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = doc.getElementById(id);
      if (fresh && !busy(table)) {
        table.innerHTML = fresh.innerHTML;
        document.body.dataset.liveRefreshed = String(Number(document.body.dataset.liveRefreshed || 0) + 1);
      }
    }
    function schedule() { clearTimeout(timer); timer = setTimeout(refresh, 700); }
    for (const slug of JSON.parse(table.dataset.liveProjects || "[]")) {
      WL.live.connect(WL.live.projectPath(slug), schedule, { onState: (state) => { document.body.dataset.live = state; } });
    }
  };
  for (const table of document.querySelectorAll("[data-live-projects][id]")) WL.liveTable(table.id);
})();
